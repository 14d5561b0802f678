"""Fresh secrets of every shape the warehouse must never store, drawn anew at every run.

Each :class:`Planted` is the text a user would write (``text``) and the part of it that must
appear nowhere (``secret``). Values come from :mod:`secrets`, so no test can be tuned to a
literal; only the fixed parts of each shape (a ``ghp_`` prefix, the ``T3BlbkFJ`` inside an
OpenAI key, an 88-character Azure key) are written here, as the providers define them.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import string
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits


@dataclass(frozen=True)
class Planted:
    kind: str
    text: str  # what is written: a value, a header, a connection string
    secret: str  # what must never be seen


def _chars(alphabet: str, n: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _jwt() -> str:
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64url(json.dumps({"sub": _chars(ALNUM, 12), "iat": 1700000000}).encode())
    return f"{header}.{payload}.{_b64url(os.urandom(32))}"


def _pem() -> tuple[str, str]:
    body = base64.b64encode(os.urandom(190)).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    block = "\n".join(["-----BEGIN RSA PRIVATE KEY-----", *lines, "-----END RSA PRIVATE KEY-----"])
    return block, lines[1]


def fresh_secrets() -> list[Planted]:
    """One fresh secret of each shape (the shapes of issue 28 and the ones before it)."""
    azure_key = base64.b64encode(os.urandom(64)).decode()
    password = _chars(ALNUM, 14) + "!"
    pem, pem_line = _pem()
    jwt = _jwt()
    slack_hook = (
        f"https://hooks.slack.com/services/T{_chars(string.ascii_uppercase + string.digits, 8)}"
        f"/B{_chars(string.ascii_uppercase + string.digits, 10)}/{_chars(ALNUM, 24)}"
    )
    return [
        Planted(
            "aws access key id", (k := "AKIA" + _chars("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)), k
        ),
        Planted(
            "azure connection string",
            f"DefaultEndpointsProtocol=https;AccountName={_chars(string.ascii_lowercase, 10)};"
            f"AccountKey={azure_key};EndpointSuffix=core.windows.net",
            azure_key,
        ),
        Planted("github token", (k := "ghp_" + _chars(ALNUM, 36)), k),
        Planted("gitlab token", (k := "glpat-" + _chars(ALNUM + "_-", 20)), k[6:]),
        Planted(
            "slack token",
            (
                k := f"xoxb-{_chars(string.digits, 11)}-{_chars(string.digits, 12)}-"
                f"{_chars(LOWER_ALNUM, 24)}"
            ),
            k[5:],
        ),
        Planted("slack webhook", slack_hook, slack_hook.rsplit("/", 1)[1]),
        Planted("npm token", (k := "npm_" + _chars(ALNUM, 36)), k),
        Planted(
            "npmrc line",
            f"//registry.npmjs.org/:_authToken=npm_{(k := _chars(ALNUM, 36))}",
            k,
        ),
        Planted("pypi token", (k := "pypi-AgEIcHlwaS5vcmc" + _b64url(os.urandom(80))), k),
        Planted(
            "openai project key",
            (k := f"sk-proj-{_chars(ALNUM, 40)}T3BlbkFJ{_chars(ALNUM, 40)}"),
            k,
        ),
        Planted("anthropic key", (k := f"sk-ant-api03-{_b64url(os.urandom(70))}AA"), k),
        Planted("stripe live key", (k := "sk_live_" + _chars(ALNUM, 99)), k[8:]),
        Planted("twilio api key", (k := "SK" + _chars("0123456789abcdef", 32)), k),
        Planted(
            "sendgrid key",
            (k := f"SG.{_chars(ALNUM + '_-', 22)}.{_chars(ALNUM + '_-', 43)}"),
            k,
        ),
        Planted("hugging face token", (k := "hf_" + _chars(string.ascii_letters, 34)), k),
        Planted("google api key", (k := "AIza" + _chars(ALNUM + "_-", 35)), k),
        Planted("jwt", jwt, jwt.split(".", 1)[1]),
        Planted("private key", pem, pem_line),
        Planted("bearer header", f"Authorization: Bearer {(k := secrets.token_urlsafe(32))}", k),
        Planted("token header", f"Authorization: Token {(k := secrets.token_hex(20))}", k),
        Planted("url password", f"postgres://trainer:{password}@db.internal:5432/runs", password),
        Planted("password in a message", f"login failed: password={(k := _chars(ALNUM, 12))}", k),
        Planted("random token", (k := secrets.token_urlsafe(48)), k),
    ]


def innocent_environment() -> dict[str, str]:
    """Environment variables with names that look like nothing, holding tokens."""
    return {
        "MODEL_REGISTRY_REF": secrets.token_urlsafe(48),
        "BUILD_HANDLE": secrets.token_hex(20),
    }
