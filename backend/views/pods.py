"""`c3 pod status --json`'s rows (`pod_rows` builds them from the runtime), and what the cockpit's pod view is built from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from backend.live.engine_metrics import EngineMetrics
from backend.runtime.models import Placement, ResourceUse

if TYPE_CHECKING:
    from backend.models import Pod
    from backend.runtime.context import RuntimeContext


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
    usage: ResourceUse | None = None
    """Its workload's CPU % and memory now (`docker stats`; the simulator: its process's); null unless
    running, or when the runtime could not read them."""

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


def pod_rows(ctx: RuntimeContext, pods: Iterable[Pod], *, health_path_of: Any = None, estate: str | None = None) -> list[PodStatus]:
    """`c3 pod status` rows: name, slug, gpus, port, running, serving, placement.

    With `estate` (the file's absolute path), a workload of the same name started from another estate
    file is not this pod: the row says `state: other-estate` and names that file in `other_estate`.
    """
    from backend.runtime.models import Workload
    from backend.runtime.readiness import probe_health
    from backend.runtime.status import describe_estate, placement_of, same_estate

    pods = list(pods)
    workloads = dict(ctx.runtime.workloads())
    foreign = {}
    if estate is not None:
        foreign = {p.name: workloads.pop(p.name) for p in pods if p.name in workloads and not same_estate(workloads[p.name].estate, estate)}
    procs = ctx.processes()
    owners: Mapping[int, str | None] = {}
    if procs and any(workloads.get(p.name) and workloads[p.name].running for p in pods):
        owners = ctx.runtime.owners(p.pid for p in procs)
    rows: list[PodStatus] = []
    for pod in pods:
        workload = workloads.get(pod.name) or Workload(pod=pod.name, status="absent")
        serving = False
        if workload.running:
            path = health_path_of(pod) if health_path_of else "/v1/models"
            serving = probe_health(f"http://127.0.0.1:{pod.port}{path}", timeout=2.0) == "ready"
        place = placement_of(ctx, pod, workload, serving=serving, processes=procs, owners=owners)
        other = foreign.get(pod.name)
        if other is not None:
            place = place.model_copy(update={"reason": f"container c3-{pod.name} belongs to {describe_estate(other.estate)}"})
        rows.append(PodStatus(
            name=pod.name, slug=pod.slug, gpus=list(pod.gpus), port=pod.port, running=workload.running, serving=serving,
            state=workload.status if other is None else "other-estate", placement=place,
            other_estate=(other.estate or "") if other is not None else None, restart_count=workload.restart_count if other is None else 0,
        ))
    return rows
