"""What `--profile` means for a shard.

`--profile NAME` reads `$C3_HOME/profiles/NAME.yaml`. A shard uses these keys, either at the top
level (`kind: shard` or no kind) or under a `shard:` mapping (so a recipe profile written by
`c3 recipes launch`, `kind: recipe`, can carry a shard part too; its other keys are left alone):

    model: Qwen/Qwen3-235B-A22B-GPTQ-Int4   # what `vllm serve` gets (HF id or a local path)
    args: [--max-model-len, "32768"]        # extra `vllm serve` arguments (a list, or one string)
    env: {NCCL_IB_DISABLE: "0"}             # extra environment on every node (secret by default)
    public_env: [NCCL_IB_DISABLE]           # names that may be shown and passed in the clear
    tp: 2                                   # defaults for --tp/--pp/--backend/--port
    pp: 1
    backend: ray
    port: 8000

Without such a file, the value is taken as model args: `--profile "Qwen/Qwen3-8B --max-model-len 8192"`
is the model followed by `vllm serve` arguments. Every `env` value is a secret (passed on stdin, shown
as `<hidden>`) unless its name is in `public_env` and neither name nor value looks like a credential
(backend.secrets_env); HF_TOKEN from c3's own environment is passed on too.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, field_validator

from backend import paths, strict_yaml
from backend.envnames import ENV_NAME
from backend.errors import Refused, UsageError
from backend.limits import PORT_MAX, PORT_MIN
from backend.userfiles import read_text

PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ShardProfile(BaseModel):
    """The shard part of a profile."""

    model: str = Field(min_length=1)
    """Model `vllm serve` gets."""
    args: list[str] = Field(default_factory=list)
    """Extra `vllm serve` arguments."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment on every node (secret unless named in `public_env`)."""
    public_env: list[str] = Field(default_factory=list)
    """Names in `env` that may be shown in the dry run and passed in the clear."""
    tp: int | None = Field(default=None, ge=1)
    """Default for `--tp`."""
    pp: int | None = Field(default=None, ge=1)
    """Default for `--pp`."""
    backend: str | None = Field(default=None, pattern="^(ray|mp|rpc)$")
    """Default for `--backend`."""
    port: int | None = Field(default=None, ge=PORT_MIN, le=PORT_MAX)
    """Default for `--port`."""
    source: str = ""
    """Where it came from (a file path, or `--profile` text)."""

    @field_validator("args", mode="before")
    @classmethod
    def _split_args(cls, value: object) -> object:
        return shlex.split(value) if isinstance(value, str) else [str(v) for v in value] if isinstance(value, list) else value

    @field_validator("env", mode="before")
    @classmethod
    def _env_strings(cls, value: object) -> object:
        return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        # Every key reaches a shell on each node: only POSIX names (backend.envnames).
        bad = [k for k in value if not ENV_NAME.fullmatch(k)]
        if bad:
            raise ValueError(f"environment name {bad[0][:60]!r} is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)")
        return value


def load_profile(value: str, directory: Path | None = None) -> ShardProfile:
    """A profile by name from `$C3_HOME/profiles/`, or `MODEL [ARGS…]` given inline."""
    text = value.strip()
    if not text:
        raise UsageError("--profile is empty", hint="name a profile in $C3_HOME/profiles/ or give a model, e.g. --profile Qwen/Qwen3-8B")
    directory = directory or paths.profiles_dir()
    if PROFILE_NAME.match(text):
        for suffix in (".yaml", ".yml"):
            path = directory / f"{text}{suffix}"
            if _quietly(path.is_file):
                return _from_file(path)
    try:
        words = shlex.split(text)
    except ValueError as error:  # an unbalanced quote
        raise UsageError(f"--profile {_short(text)!r}: {error}", hint="quote it as a shell would, e.g. --profile 'ORG/MODEL --max-model-len 8192'") from None
    if not words:
        raise UsageError("--profile is empty", hint="name a profile in $C3_HOME/profiles/ or give a model, e.g. --profile Qwen/Qwen3-8B")
    model = words[0]
    if "/" not in model and not _quietly(Path(model).exists):
        raise Refused(
            f"no profile `{_short(model)}` in {directory} and it does not look like a model (HF id or path)",
            hint="write profiles/NAME.yaml with `model:` (and `args:`), or pass --profile 'ORG/MODEL [vllm args]'",
        )
    return ShardProfile(model=model, args=words[1:], source="--profile")


def _from_file(path: Path) -> ShardProfile:
    data = strict_yaml.load(read_text(path, what="profile"), source=str(path), what="profile") or {}
    if not isinstance(data, dict):
        raise UsageError(f"profile {path} must be a mapping")
    if isinstance(data.get("shard"), dict):
        section = data["shard"]
    elif data.get("kind", "shard") != "shard":
        # A recipe profile's keys mean something else (overrides of a recipe, not vllm args).
        raise Refused(
            f"profile {path} is a {data.get('kind')} profile and has no `shard:` section",
            hint="add `shard: {model: ORG/NAME, args: [...]}` to it, or write a separate shard profile",
        )
    else:
        section = data
    known = {k: section[k] for k in ("model", "args", "env", "public_env", "tp", "pp", "backend", "port") if k in section}
    if "model" not in known:
        raise Refused(f"profile {path} has no `model:` for a shard", hint="add `model: ORG/NAME` (top level or under `shard:`)")
    try:
        return ShardProfile(**known, source=str(path))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UsageError(f"profile {path}: {where}: {first['msg']}") from exc


def _quietly(check: Callable[[], object]) -> bool:
    """A file-system yes/no that treats an unusable name (too long, bad bytes) as no."""
    try:
        return bool(check())
    except (OSError, ValueError):
        return False


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
