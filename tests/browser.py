"""Headless Chromium for the tests that look at pages as a person would (report, UI).

Chromium is a system package, not a pip one. Without it these tests skip with the command that
installs it; CI sets ``WAREHOUSE_TEST_REQUIRE_BROWSER=1`` (in ``.ci/run``), so there a missing
browser fails the run instead of silently skipping the browser tests.
"""

from __future__ import annotations

import os
import shutil

import pytest

INSTALL = "apt-get install -y chromium chromium-driver"


@pytest.fixture(scope="session")
def chromium() -> str:
    """The path of Debian's chromium; skips (or fails where required) when it is missing."""
    return find_chromium()


def find_chromium() -> str:
    """Chromium's path, else ``pytest.skip`` naming the install command (``pytest.fail`` when
    ``WAREHOUSE_TEST_REQUIRE_BROWSER`` is set)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is not None:
        return exe
    reason = f"chromium is not installed ({INSTALL})"
    if os.environ.get("WAREHOUSE_TEST_REQUIRE_BROWSER", "") not in ("", "0"):
        pytest.fail(f"{reason}; WAREHOUSE_TEST_REQUIRE_BROWSER is set", pytrace=False)
    pytest.skip(reason)
