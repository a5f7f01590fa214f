"""`c3 pod status --json`'s rows, and what the cockpit's pod view is built from."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from backend.live.engine_metrics import EngineMetrics
from backend.runtime.models import Placement


class PodStatus(BaseModel):
    """One pod of an estate file: planned where, running, serving, and where it really landed."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    name: str
    """The pod's name in the estate file (its container is `c3-<name>`)."""
    slug: str
    """Its catalog entry."""
    gpus: list[int]
    """Host GPU indices the plan pins it to."""
    port: int
    """Host port its OpenAI endpoint is published on."""
    running: bool
    """Its workload runs."""
    serving: bool
    """Its health path answered just now."""
    state: str
    """The workload's status (`absent`, `created`, `running`, `exited`…), or `other-estate` when
    `c3-<name>` was started from another estate file."""
    placement: Placement
    """Where its engine really landed (`verdict` ok|mismatch|unknown, `requested`, `actual`, …, `reason`)."""
    other_estate: str | None = None
    """The estate file that started `c3-<name>` when it is not this one ("" for `c3 serve`); only in
    the JSON when set."""
    metrics: EngineMetrics | None = None
    """One scrape of the engine's own /metrics; null unless serving (the CLI's rates need two scrapes)."""
    metrics_error: str | None = None
    """Why the scrape failed, one line."""
    restart_count: int = 0
    """How many times Docker restarted its container after the engine exited (`RestartCount`; the
    container runs under `unless-stopped` once it has served); 0 when it never did or is not running."""

    @model_serializer(mode="wrap")
    def _drop_unset_other_estate(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.other_estate is None:
            data.pop("other_estate", None)
        return data

    @classmethod
    def absent(cls, pod: Any, reason: str) -> PodStatus:
        """A pod the live view has not judged yet (or that does not run), with why in `placement`."""
        return cls(name=pod.name, slug=pod.slug, gpus=list(pod.gpus), port=pod.port, running=False, serving=False, state="absent",
                   placement=Placement(verdict="unknown", requested=(), requested_indices=tuple(pod.gpus), reason=reason))
