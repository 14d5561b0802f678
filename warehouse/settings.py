"""Settings: where records go, how to reach the servers, and the recording policy.

One ``Settings`` object, loaded inside commands (never at import). Precedence, highest first::

    CLI flag  >  WAREHOUSE_* environment  >  Hydra callback parameters  >  config file  >  defaults

The config file is ``warehouse.toml`` (top-level keys) or ``[tool.warehouse]`` in
``pyproject.toml``, looked up in the current directory, then upwards to the git root.
``WAREHOUSE_CONFIG`` names a file explicitly. Nothing else in the package reads ``os.environ``
for WAREHOUSE_* values.
"""

from __future__ import annotations

import contextvars
import json
import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from warehouse.capture.redact import (
    DEFAULT_REDACT_FILES,
    DEFAULT_REDACT_PATTERNS,
    RedactPolicy,
    compile_value_pattern,
    is_secret_key,
)
from warehouse.errors import ConfigurationError, check_keywords

_LAYERS: contextvars.ContextVar[dict[str, dict[str, Any]] | None] = contextvars.ContextVar(
    "warehouse_settings_layers", default=None
)


class Settings(BaseSettings):
    """Every knob of the warehouse; each field is also ``WAREHOUSE_<NAME>`` in the environment."""

    model_config = SettingsConfigDict(
        env_prefix="WAREHOUSE_", extra="ignore", validate_default=True, frozen=True
    )

    # where records go
    home: Path | None = Field(
        None, description="Local warehouse folder (default: .warehouse/ at the git root, else cwd)."
    )
    store: Literal["local", "elasticsearch"] | None = Field(
        None, description="Store engine; default: elasticsearch when es_url is set, else local."
    )
    experiment: str | None = Field(None, description="Default experiment name.")
    project: str | None = Field(None, description="Project name recorded on every run.")

    # recording policy
    primary_metric: str = Field("val.acc", description="split.metric ranking runs, e.g. val.acc.")
    direction: Literal["max", "min"] | None = Field(
        None, description="Whether higher or lower primary_metric is better (default: inferred)."
    )
    baseline_error: float = Field(0.0, description="Human/Bayes error for the bias decomposition.")
    redact_patterns: Annotated[tuple[str, ...], NoDecode] = Field(
        DEFAULT_REDACT_PATTERNS, description="Config keys containing these are redacted."
    )
    redact_value_patterns: Annotated[tuple[str, ...], NoDecode] = Field(
        (),
        description="Extra regexes of secret values, added to the built-in ones "
        "(a JSON list, or one per line).",
    )
    redact_files: Annotated[tuple[str, ...], NoDecode] = Field(
        DEFAULT_REDACT_FILES, description="File name globs whose git diff is never recorded."
    )
    redact_plugins: Annotated[tuple[str, ...], NoDecode] = Field(
        (),
        description="Extra detect-secrets plugins: .py files or module:Class, comma-separated.",
    )
    seed_keys: Annotated[tuple[str, ...], NoDecode] = Field(
        ("seed", "*_seed"),
        description="Config keys that only pick a seed (glob on the last dotted part).",
    )
    strict: bool = Field(False, description="Raise on warehouse failures instead of warning.")
    capture_git_diff: bool = Field(True, description="Keep `git diff HEAD` when the tree is dirty.")

    # Elasticsearch
    es_url: str | None = Field(None, description="Elasticsearch URL, e.g. http://localhost:9200.")
    es_api_key: SecretStr | None = Field(None, description="Elasticsearch/Kibana API key (base64).")
    es_username: str | None = Field(None, description="Basic-auth user for Elasticsearch/Kibana.")
    es_password: SecretStr | None = Field(None, description="Basic-auth password (never recorded).")
    es_ca_certs: Path | None = Field(None, description="CA certificate file for HTTPS.")
    es_fingerprint: str | None = Field(
        None, description="SHA-256 fingerprint of the CA/server cert."
    )
    es_verify_certs: bool = Field(True, description="Verify TLS certificates.")
    require_tls: bool = Field(
        False,
        description="Refuse to send Elasticsearch, Kibana or S3 credentials over plain HTTP "
        "to a host other than this machine (without it: one warning per process).",
    )
    es_timeout_s: float = Field(
        4.0,
        description="Longest wait for an Elasticsearch answer; never retried after it, so a "
        "command against a hung server ends within about 5 s.",
        gt=0,
    )
    index_prefix: str = Field("warehouse", description="Prefix of every index, template, alias.")
    steps_retention: str = Field("90d", description="Data stream lifecycle retention of steps.")

    # object storage
    s3_url: str | None = Field(None, description="s3://bucket/prefix for artifacts and outputs.")
    s3_endpoint: str | None = Field(
        None, description="Non-AWS endpoint, e.g. http://localhost:9000."
    )
    s3_region: str | None = Field(None, description="S3 region (else the usual AWS settings).")
    s3_access_key_id: SecretStr | None = Field(None, description="Else boto3's credential chain.")
    s3_secret_access_key: SecretStr | None = Field(None, description="Else boto3's chain.")
    presign_expiry_s: int = Field(7 * 24 * 3600, description="Lifetime of presigned URLs.")

    # Kibana
    kibana_url: str | None = Field(
        None, description="Kibana URL; `warehouse init` imports the dashboards."
    )
    kibana_space: str | None = Field(None, description="Kibana space id (default space if unset).")

    # live steps
    console: bool = Field(True, description="Print the live console line on stderr.")
    system_interval_s: float = Field(10.0, description="System sampler period; 0 turns it off.")
    heartbeat_s: float = Field(
        30.0,
        description="A running run saves heartbeat_at this often; 3 missed beats show it as lost.",
        gt=0,
    )
    system_per_rank: bool = Field(
        False,
        description="In a distributed job, every rank samples its own process and GPU and "
        "sends the figures to rank 0's run (steps with a `rank` field).",
    )

    debug: bool = Field(False, description="Tracebacks on errors (also --debug).")

    @model_validator(mode="before")
    @classmethod
    def _known_names(cls, data: Any) -> Any:
        """``Settings(es_urll=...)`` is a ``TypeError`` naming ``es_url``, not ignored (the
        environment only brings known names; :func:`load` checks the Hydra and file layers)."""
        if isinstance(data, dict):
            check_keywords("Settings()", data, cls.model_fields)
        return data

    @field_validator(
        "redact_patterns", "redact_files", "redact_plugins", "seed_keys", mode="before"
    )
    @classmethod
    def _split_patterns(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(p.strip() for p in value.split(",") if p.strip())
        return value

    @field_validator("redact_value_patterns", mode="before")
    @classmethod
    def _split_regexes(cls, value: Any) -> Any:
        """Regexes hold commas: a JSON list, else one per line (a single one as it is)."""
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    value = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"not a JSON list of regexes: {exc}") from None
            else:
                value = [line.strip() for line in text.splitlines() if line.strip()]
        if isinstance(value, list | tuple):
            for pattern in value:
                compile_value_pattern(str(pattern))  # a clear error now, not at the first run
        return value

    @field_validator("redact_plugins", mode="after")
    @classmethod
    def _load_plugins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if value:  # a clear error now, not at the first run (imports detect-secrets)
            from warehouse.capture.secret_library import check_plugins

            check_plugins(value)
        return value

    @property
    def redaction(self) -> RedactPolicy:
        """What the recorder redacts with: these patterns and plugins, plus this process's
        environment values that look secret, by name or by value (read now)."""
        return RedactPolicy.from_environment(
            self.redact_patterns,
            self.redact_value_patterns,
            self.redact_files,
            plugins=self.redact_plugins,
        )

    @property
    def store_engine(self) -> Literal["local", "elasticsearch"]:
        """The engine in use: explicit ``store``, else elasticsearch when ``es_url`` is set."""
        if self.store is not None:
            return self.store
        return "elasticsearch" if self.es_url else "local"

    @property
    def resolved_home(self) -> Path:
        """The local warehouse folder, resolved once against the git root or cwd."""
        if self.home is not None:
            return self.home.expanduser().resolve()
        return find_default_home()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # CLI flag > env > Hydra callback params > config file > defaults
        return (
            init_settings,
            env_settings,
            _LayerSource(settings_cls, "hydra"),
            _LayerSource(settings_cls, "file"),
        )


class LaunchEnvironment(BaseSettings):
    """What a distributed launcher tells each of its processes, read from the environment
    under the launchers' own names (torchrun and Lightning, SLURM, MPI): no ``WAREHOUSE_``
    prefix, no config file or Hydra layer (no ``.env`` or secrets folder either).
    :mod:`warehouse.recording.ranks` decides the rank from it."""

    model_config = SettingsConfigDict(extra="ignore", frozen=True, env_ignore_empty=True)

    rank: int | None = Field(default=None, validation_alias="RANK")
    world_size: int | None = Field(default=None, validation_alias="WORLD_SIZE")
    local_rank: int | None = Field(default=None, validation_alias="LOCAL_RANK")
    local_world_size: int | None = Field(default=None, validation_alias="LOCAL_WORLD_SIZE")
    node_rank: int | None = Field(
        default=None, validation_alias=AliasChoices("NODE_RANK", "GROUP_RANK")
    )
    slurm_procid: int | None = Field(default=None, validation_alias="SLURM_PROCID")
    slurm_ntasks: int | None = Field(default=None, validation_alias="SLURM_NTASKS")
    mpi_rank: int | None = Field(
        default=None, validation_alias=AliasChoices("OMPI_COMM_WORLD_RANK", "PMI_RANK")
    )
    mpi_size: int | None = Field(
        default=None, validation_alias=AliasChoices("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
    )
    # the same on every rank of one launch: where per-rank figures meet
    slurm_job_id: str | None = Field(default=None, validation_alias="SLURM_JOB_ID")
    slurm_step_id: str | None = Field(default=None, validation_alias="SLURM_STEP_ID")
    torchelastic_run_id: str | None = Field(default=None, validation_alias="TORCHELASTIC_RUN_ID")
    master_addr: str | None = Field(default=None, validation_alias="MASTER_ADDR")
    master_port: str | None = Field(default=None, validation_alias="MASTER_PORT")


def load_launch() -> LaunchEnvironment:
    """The launcher's variables of this process; a value that is not a number where one is
    expected (``RANK=abc``) is a :class:`ConfigurationError` naming it."""
    try:
        return LaunchEnvironment()
    except ValidationError as exc:
        bad = "; ".join(
            f"{err['loc'][0] if err['loc'] else '?'}={err.get('input')!r}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigurationError(
            f"cannot read this process's rank from the launcher's environment ({bad}); "
            "RANK, WORLD_SIZE, LOCAL_RANK, SLURM_PROCID ... must be whole numbers"
        ) from None


class _LayerSource(PydanticBaseSettingsSource):
    """A precedence layer filled by :func:`load` (Hydra parameters, the config file)."""

    def __init__(self, settings_cls: type[BaseSettings], layer: str) -> None:
        super().__init__(settings_cls)
        self.layer = layer

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return (_LAYERS.get() or {}).get(self.layer, {}).get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        data = (_LAYERS.get() or {}).get(self.layer, {})
        return {k: v for k, v in data.items() if v is not None}


def load(
    cli: dict[str, Any] | None = None,
    hydra: dict[str, Any] | None = None,
    cwd: Path | None = None,
) -> Settings:
    """The settings in force: ``cli`` flags (None = not given) over env, Hydra params, file."""
    base = Path(cwd) if cwd else Path.cwd()
    file_values = _read_config_file(base)
    known = set(Settings.model_fields)
    for name, layer in (("Hydra callback", hydra or {}), ("config file", file_values)):
        unknown = sorted(set(layer) - known)
        if unknown:
            raise ConfigurationError(
                f"unknown warehouse setting(s) {', '.join(unknown)} in the {name}; "
                f"known settings: {', '.join(sorted(known))}"
            )
    token = _LAYERS.set({"hydra": dict(hydra or {}), "file": file_values})
    try:
        given = {k: v for k, v in (cli or {}).items() if v is not None}
        try:
            return Settings(**given)
        except ValidationError as exc:
            raise ConfigurationError(_invalid(exc, given, hydra or {}, file_values)) from None
    finally:
        _LAYERS.reset(token)


def _invalid(
    exc: ValidationError,
    cli: dict[str, Any],
    hydra: dict[str, Any],
    file_values: dict[str, Any],
) -> str:
    """One line per bad setting: where it came from, what it holds, what it should hold."""
    lines = []
    for err in exc.errors():
        name = str(err["loc"][0]) if err["loc"] else "?"
        env = f"WAREHOUSE_{name.upper()}"
        if name in cli:
            source = f"--{name.replace('_', '-')}"
        elif env in os.environ:
            source = env
        elif name in hydra:
            source = f"{name} in the Hydra callback"
        elif name in file_values:
            source = f"{name} in the warehouse config file"
        else:
            source = name
        shown = "" if is_secret_key(name, DEFAULT_REDACT_PATTERNS) else f" = {err.get('input')!r}"
        lines.append(f"{source}{shown}: {err['msg']}")
    return "invalid warehouse setting: " + "; ".join(lines)


def _read_config_file(base: Path) -> dict[str, Any]:
    explicit = os.environ.get("WAREHOUSE_CONFIG")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigurationError(
                f"WAREHOUSE_CONFIG points at {path}, which does not exist; fix the path or unset it"
            )
        return _parse_config(path)
    top = git_root(base)
    for folder in (base, *base.parents):
        for name in ("warehouse.toml", "pyproject.toml"):
            path = folder / name
            if path.is_file():
                values = _parse_config(path)
                if values or name == "warehouse.toml":
                    return values
        if top is not None and folder == top:
            break
    return {}


def _parse_config(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"cannot read warehouse config {path}: {exc}") from None
    if path.name == "pyproject.toml":
        data = data.get("tool", {}).get("warehouse", {})
    return dict(data)


def git_root(start: Path) -> Path | None:
    """The top of the git work tree containing ``start`` (a plain walk, no git process)."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def find_default_home(cwd: Path | None = None) -> Path:
    """``.warehouse/`` at the git root of ``cwd`` (or of Hydra's original cwd), else in cwd."""
    base = Path(cwd) if cwd else Path.cwd()
    root = git_root(base)
    return (root or base.resolve()) / ".warehouse"
