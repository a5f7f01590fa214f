"""c3's configuration from the environment, read in one place (a pydantic model, `C3_` prefix).

The entry points (the CLI's `main`, which also starts the cockpit, and `c3 demo`) build one
`Settings` and install it with `using(...)`; everything below reads it through `current()`. Code run
outside an entry point (a library caller, a test) gets settings built from the environment as it is
now: `current()` rebuilds them when one of the variables changed, so no one ever reads a stale value.

`c3 demo` builds its own `Settings` (demo folders, built-in rig, simulated runtime) instead of
rewriting the process environment; the stub engines it starts get an explicit env dict
(`Settings.child_env`).

Secrets (`HF_TOKEN`, `HUGGING_FACE_HUB_TOKEN`, `VLLM_API_KEY`) are `SecretStr`: their repr, str and
JSON dump are `**********`, so printing the settings never shows them. DESIGN.md has the table of
every variable.

The environment is read by `_from_environment` below, not by pydantic-settings: importing that library
cost more CPU than the rest of `c3 pod list` (issue 22). It reads the variables exactly as the
pydantic-settings source did for this model: names matched case-insensitively (`c3_home` counts, the
last spelling in the environment wins), the `C3_` prefix on the field name, the aliased variables
(`HF_TOKEN`, …) by their own name first and then, as `populate_by_name` made pydantic-settings do,
by the prefixed field name (`C3_HF_TOKEN`); values are passed as the strings they are (no JSON, an
empty value is a value) to the same validators.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from backend.errors import UsageError


class Settings(BaseModel):
    """Every environment variable c3 reads (DESIGN.md, "Environment")."""

    # validate_default: as pydantic-settings' BaseSettings did (the defaults go through the validators too).
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True, validate_default=True)

    home: Path | None = None
    """`C3_HOME`: the configuration folder (default `~/.config/c3`)."""
    state: Path | None = None
    """`C3_STATE`: the state folder (default `~/.local/state/c3`)."""
    rig: str = ""
    """`C3_RIG`: a simulated rig file, or `demo` for the built-in one; empty = real NVML."""
    runtime: Literal["", "docker", "sim"] = ""
    """`C3_RUNTIME`: force the pod runtime; empty = `sim` with a simulated rig, else `docker`."""
    gpu_mode: str = ""
    """`C3_GPU_MODE`: force how containers get their GPUs (`--gpu-mode` wins)."""
    gpu_registry: Path | None = None
    """`C3_GPU_REGISTRY`: where stand-in engines register their GPUs (default `$C3_STATE/sim/gpu-registry`)."""
    known_hosts: str = ""
    """`C3_KNOWN_HOSTS`: more trusted host-key files, os.pathsep-separated."""
    ssh_config: str | None = None
    """`C3_SSH_CONFIG`: OpenSSH client config files, os.pathsep-separated (set but empty = none); unset = `~/.ssh/config`."""
    pool_loop: Literal["", "uvloop", "asyncio"] = ""
    """`C3_POOL_LOOP`: the pool router's event loop (`asyncio` opts out of uvloop)."""
    probe_use_env_proxy: bool = False
    """`C3_PROBE_USE_ENV_PROXY`: let health/readiness/metrics probes use HTTP(S)_PROXY (off: they go direct)."""
    ascii: bool | None = None
    """`C3_ASCII`: 1 draws the cockpit in ASCII only, 0 keeps Unicode; unset: decided by the terminal's locale."""
    demo: bool = False
    """`C3_DEMO`: set by `c3 demo` for the processes it starts; the demo's files and rig are in use."""
    stub_startup_delay: float | None = Field(default=None, ge=0, le=3600)
    """`C3_STUB_STARTUP_DELAY`: seconds the demo's stub engines take to "load"."""

    hf_token: SecretStr | None = Field(default=None, validation_alias=AliasChoices("HF_TOKEN"))
    """`HF_TOKEN`: passed to engines in their environment, never shown."""
    hugging_face_hub_token: SecretStr | None = Field(default=None, validation_alias=AliasChoices("HUGGING_FACE_HUB_TOKEN"))
    """`HUGGING_FACE_HUB_TOKEN`: the older name of the same token, forwarded to shard nodes."""
    vllm_api_key: SecretStr | None = Field(default=None, validation_alias=AliasChoices("VLLM_API_KEY"))
    """`VLLM_API_KEY`: sent as a Bearer token by the readiness probe, never logged."""
    gateway_api_key: SecretStr | None = None
    """`C3_GATEWAY_API_KEY`: the key `c3 gateway serve` requires of its clients (unless --api-key-file), never shown."""
    hf_home: Path | None = Field(default=None, validation_alias=AliasChoices("HF_HOME"))
    """`HF_HOME`: the host's Hugging Face cache mounted into containers (default `~/.cache/huggingface`)."""
    docker_host: str = Field(default="", validation_alias=AliasChoices("DOCKER_HOST"))
    """`DOCKER_HOST`: the daemon docker-py talks to (named in messages; docker-py reads it itself)."""
    xdg_config_home: Path | None = Field(default=None, validation_alias=AliasChoices("XDG_CONFIG_HOME"))
    """`XDG_CONFIG_HOME`: where user systemd units go (default `~/.config`)."""

    @field_validator("runtime", "pool_loop", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("home", "state", "gpu_registry", "hf_home", "xdg_config_home", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    def known_hosts_files(self) -> list[Path]:
        """`C3_KNOWN_HOSTS` as paths."""
        return [Path(p) for p in self.known_hosts.split(os.pathsep) if p]

    def secret_env(self) -> dict[str, str]:
        """The Hugging Face tokens that are set, by variable name (for a child's environment only)."""
        pairs = {"HF_TOKEN": self.hf_token, "HUGGING_FACE_HUB_TOKEN": self.hugging_face_hub_token}
        return {name: value.get_secret_value() for name, value in pairs.items() if value is not None and value.get_secret_value()}

    def child_env(self) -> dict[str, str]:
        """The `C3_*` variables a child c3 process or stub engine needs to see these settings."""
        out: dict[str, str] = {}
        for name in ("home", "state", "rig", "runtime", "gpu_mode", "gpu_registry", "known_hosts", "ssh_config", "stub_startup_delay"):
            value = getattr(self, name)
            if value not in (None, ""):
                out["C3_" + name.upper()] = str(value)
        if self.demo:
            out["C3_DEMO"] = "1"
        return out


_PREFIX = "C3_"


def _variables(name: str) -> tuple[tuple[str, str], ...]:
    """(variable, key to validate under) for one field, in the order they are looked up."""
    alias = Settings.model_fields[name].validation_alias
    own = ((_PREFIX + name.upper(), name),)
    if isinstance(alias, AliasChoices):
        return tuple((str(choice), str(choice)) for choice in alias.choices) + own
    return own


# Every variable the settings read, per field (the aliases are HF_TOKEN & co.).
_LOOKUP = {name: _variables(name) for name in Settings.model_fields}

_installed: Settings | None = None
_cache: tuple[tuple[tuple[str, str], ...], Settings] | None = None


def _from_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The raw values the settings are validated from, keyed as `Settings.model_validate` takes them."""
    folded = {name.lower(): value for name, value in environ.items()}
    found: dict[str, str] = {}
    for candidates in _LOOKUP.values():
        for variable, key in candidates:
            value = folded.get(variable.lower())
            if value is not None:
                found[key] = value
                break
    return found


def load(environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from `environ` (default: the process environment); a bad value is a usage error
    naming the variable (never its value: it may be a secret)."""
    return _validate(_from_environment(os.environ if environ is None else environ))


def _validate(found: Mapping[str, str]) -> Settings:
    try:
        return Settings.model_validate(found)
    except ValidationError as error:
        first = error.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "?"
        variable = _variable_of(field)
        raise UsageError(f"{variable} is not valid: {first['msg']}", hint=f"fix or unset {variable} (see `C3_*` in DESIGN.md)") from None


def child_process_env() -> dict[str, str]:
    """The environment for a child c3 process: this one's, with the installed settings on top (what `c3 demo`
    set without touching `os.environ`)."""
    return {**os.environ, **current().child_env()}


def current() -> Settings:
    """The settings in force: the ones an entry point installed, else the environment's as it is now."""
    global _cache
    if _installed is not None:
        return _installed
    found = _from_environment(os.environ)
    key = tuple(sorted(found.items()))
    if _cache is None or _cache[0] != key:
        _cache = (key, _validate(found))
    return _cache[1]


def install(settings: Settings) -> Settings:
    """Install `settings` for the rest of the process (`c3 demo`); `reset()` undoes it."""
    global _installed
    _installed = settings
    return settings


def reset() -> None:
    """Back to settings read from the environment."""
    global _installed
    _installed = None


@contextmanager
def using(settings: Settings) -> Iterator[Settings]:
    """Install `settings` for the duration (an entry point, or `c3 demo`); the previous ones come back after."""
    global _installed
    previous, _installed = _installed, settings
    try:
        yield settings
    finally:
        _installed = previous


def _variable_of(field: str) -> str:
    info = Settings.model_fields.get(field)
    if info is None:
        return field
    return field if info.validation_alias is not None else f"C3_{field.upper()}"
