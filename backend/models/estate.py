"""Pods and the estate file that plans them (schema_version 1, DESIGN.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from backend.limits import PORT_MAX, PORT_MIN
from backend.models.names import POD_NAME_MAX, POD_NAME_PATTERN

__all__ = ["POD_NAME_PATTERN", "Estate", "Pod", "Problem"]


class Pod(BaseModel):
    """One model pinned to a chosen GPU set and host port."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=POD_NAME_PATTERN, max_length=POD_NAME_MAX)
    """`[a-z0-9][a-z0-9-]*`, unique case-insensitively; the container is `c3-<name>`."""
    slug: str
    """A catalog entry, `engine/name` (club-3090 files say `compose:`; both are accepted)."""
    gpus: tuple[int, ...]
    """Host GPU indices; their count equals the slug's TP × PP."""
    port: int = Field(ge=PORT_MIN, le=PORT_MAX)
    """Host port the pod's OpenAI endpoint listens on."""
    uuids: tuple[str, ...] | None = None
    """GPU UUIDs recorded at create, to detect a re-ordered rig; resolved again at boot."""
    on_demand: bool = False
    """Started by the gateway when a request names it, and stopped by it to make room: only such pods may
    share GPUs (`on_demand: true`; `c3 up` never starts two that collide)."""
    sleep_mode: bool = False
    """A vLLM pod launched with sleep mode (`--enable-sleep-mode`, `VLLM_SERVER_DEV_MODE=1` for the routes): the
    gateway puts it to sleep (level 1) and wakes it instead of stopping and booting it, where the fit says its
    sleeping footprint leaves room. Ignored for other engines (a `sleep` warning)."""


class Estate(BaseModel):
    """The whole estate file: a desired-state plan of pods, not a record of what runs."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    """Only 1 exists."""
    pods: list[Pod] = Field(default_factory=list)
    """The pods, in file order (YAML key `estate`)."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Top-level keys c3 does not use but keeps when it rewrites the file (club-3090's `rig`,
    `created`, `updated`)."""


class Problem(BaseModel):
    """One finding of estate validation. Errors block a write; warnings and notes are shown."""

    model_config = ConfigDict(frozen=True)

    code: str
    """Rule id: `schema`, `name`, `slug`, `C1` (GPU count = TP × PP), `E1` (GPU index/collision),
    `E4` (port collision), `sleep` (sleep_mode on a non-vLLM pod: a warning), `shared` (GPUs shared by on-demand pods: a note), `sm` (compute capability), `arch` (homogeneous architecture),
    `status` (experimental/deprecated slug), `fit` (fit verdict), `port` (host port in use)."""
    severity: Literal["error", "warning", "note"] = "error"
    """`error` blocks; `warning` is shown and allowed; `note` is information."""
    message: str
    """One line naming the pod, GPU, port and TP involved."""
    pod: str | None = None
    """The pod the finding is about; None for estate-wide findings naming several pods."""
    pods: tuple[str, ...] = ()
    """Every pod involved (both sides of a GPU or port collision)."""
    hint: str | None = None
    """What to do about it, when there is something obvious."""

    @property
    def blocking(self) -> bool:
        """True for errors."""
        return self.severity == "error"
