"""Settings precedence, one adjacent pair at a time: CLI > env > Hydra > file > defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from warehouse.errors import ConfigurationError
from warehouse.settings import find_default_home, load


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / ".git").mkdir()  # a git root
    monkeypatch.chdir(folder)
    return folder


def test_defaults_apply_when_nothing_is_given(project: Path) -> None:
    s = load(cwd=project)
    assert s.primary_metric == "val.acc"
    assert s.store_engine == "local"


def test_config_file_beats_defaults(project: Path) -> None:
    (project / "warehouse.toml").write_text('primary_metric = "val.f1"\n')
    assert load(cwd=project).primary_metric == "val.f1"


def test_pyproject_tool_table_is_a_config_file(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.warehouse]\nprimary_metric = "test.auc"\n')
    assert load(cwd=project).primary_metric == "test.auc"


def test_hydra_params_beat_config_file(project: Path) -> None:
    (project / "warehouse.toml").write_text('primary_metric = "val.f1"\n')
    assert load(hydra={"primary_metric": "val.iou"}, cwd=project).primary_metric == "val.iou"


def test_env_beats_hydra_params(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAREHOUSE_PRIMARY_METRIC", "val.env")
    assert load(hydra={"primary_metric": "val.iou"}, cwd=project).primary_metric == "val.env"


def test_cli_flag_beats_env(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAREHOUSE_PRIMARY_METRIC", "val.env")
    assert load(cli={"primary_metric": "val.cli"}, cwd=project).primary_metric == "val.cli"


def test_an_unset_cli_flag_never_beats_env(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAREHOUSE_PRIMARY_METRIC", "val.env")
    assert load(cli={"primary_metric": None}, cwd=project).primary_metric == "val.env"


def test_es_url_selects_the_elasticsearch_store(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAREHOUSE_ES_URL", "http://127.0.0.1:9")
    assert load(cwd=project).store_engine == "elasticsearch"
    assert load(cli={"store": "local"}, cwd=project).store_engine == "local"


def test_default_home_is_at_the_git_root_not_the_cwd(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WAREHOUSE_HOME")
    sub = project / "outputs" / "2026-11-21" / "job"
    sub.mkdir(parents=True)
    assert find_default_home(sub) == project.resolve() / ".warehouse"
    assert load(cwd=sub).resolved_home == (project.resolve() / ".warehouse")


def test_unknown_setting_in_the_config_file_names_it(project: Path) -> None:
    (project / "warehouse.toml").write_text('primery_metric = "val.acc"\n')
    with pytest.raises(ConfigurationError, match="primery_metric"):
        load(cwd=project)


def test_invalid_value_is_a_configuration_error(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAREHOUSE_DIRECTION", "sideways")
    with pytest.raises(ConfigurationError) as caught:
        load(cwd=project)
    # the variable to fix, its value and what it should be; no pydantic dump
    assert str(caught.value) == (
        "invalid warehouse setting: WAREHOUSE_DIRECTION = 'sideways': Input should be 'max' "
        "or 'min'"
    )


def test_an_invalid_flag_or_file_value_is_named_as_given(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigurationError, match=r"--direction = 'up'"):
        load(cli={"direction": "up"}, cwd=project)
    (project / "warehouse.toml").write_text('system_interval_s = "often"\n')
    with pytest.raises(ConfigurationError, match=r"system_interval_s in the warehouse config"):
        load(cwd=project)


def test_secrets_are_not_shown_in_the_settings_repr(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAREHOUSE_ES_PASSWORD", "hunter2-very-secret")
    s = load(cwd=project)
    assert "hunter2" not in repr(s)
    assert s.es_password is not None
    assert s.es_password.get_secret_value() == "hunter2-very-secret"


def test_value_patterns_hold_commas_as_a_json_list_or_one_per_line(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAREHOUSE_REDACT_VALUE_PATTERNS", '["corp-[0-9]{6,}", "x{2,3}y"]')
    assert load(cwd=project).redact_value_patterns == ("corp-[0-9]{6,}", "x{2,3}y")
    monkeypatch.setenv("WAREHOUSE_REDACT_VALUE_PATTERNS", "corp-[0-9]{6,}\nINTERNAL-[A-Z]{4}")
    settings = load(cwd=project)
    assert settings.redact_value_patterns == ("corp-[0-9]{6,}", "INTERNAL-[A-Z]{4}")
    assert settings.redaction.text("id corp-1234567") == "id ***"


def test_a_bad_value_pattern_is_refused_naming_it(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAREHOUSE_REDACT_VALUE_PATTERNS", "corp-(unclosed")
    with pytest.raises(
        ConfigurationError, match=r"WAREHOUSE_REDACT_VALUE_PATTERNS.*corp-\(unclosed"
    ):
        load(cwd=project)


def test_the_redaction_policy_scrubs_secret_environment_values(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_DB_PASS", "pLantedEnvValue")
    assert "pLantedEnvValue" in load(cwd=project).redaction.secrets


def test_capture_never_imports_settings_at_module_level() -> None:
    import ast

    import warehouse.capture

    folder = Path(warehouse.capture.__file__).parent
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:  # module level only: a function may import what it needs
            names = []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            assert not any(n.startswith("warehouse.settings") for n in names), path.name
        source = path.read_text()
        assert "warehouse.settings" not in source, path.name  # not inside functions either
