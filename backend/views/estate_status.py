"""`c3 pod status`: each pod of the estate file, live (running, serving, placement, one /metrics
scrape), and the other c3 workloads on this host. Apart from `backend.views.estate_file` so that
`c3 pod list` does not build the status rows' models (issue 22)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from backend.views.estate_file import health_path_of, planned_pods
from backend.views.pods import PodStatus

if TYPE_CHECKING:
    from backend.runtime.context import RuntimeContext


class UnplannedWorkload(BaseModel):
    """A c3 workload on this host that is not one of this file's pods (another name, or this file's
    name started from another estate file)."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    name: str
    """The pod name it runs as (`c3-<name>`)."""
    slug: str | None
    """Its catalog entry, when the workload records it."""
    port: int | None
    """Its host port."""
    running: bool
    """It runs."""
    estate: str | None
    """The estate file that started it (None: unknown, or `c3 serve`)."""


class EstateStatus(BaseModel):
    """`c3 pod status --json`: each planned pod, live, and the other c3 workloads on this host."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    file: str
    """The estate file."""
    pods: list[PodStatus]
    """One row per planned pod; a serving pod's engine /metrics scraped once."""
    unplanned: list[UnplannedWorkload]
    """c3 workloads that are not this file's pods."""


def estate_status(path: Path) -> EstateStatus:
    """Each pod of `path`: running, serving (its health path asked now), placement, one /metrics scrape."""
    from backend.views.pods import pod_rows
    from backend.wiring import open_context

    pods = planned_pods(path)
    ctx = open_context()
    rows = _with_usage(ctx, _with_engine_metrics(pod_rows(ctx, pods, health_path_of=health_path_of(ctx), estate=str(path.resolve()))))
    mine = {r.name for r in rows if r.state != "other-estate"}
    others = [
        UnplannedWorkload(name=w.pod, slug=w.slug, port=w.host_port, running=w.running, estate=w.estate or None)
        for w in ctx.runtime.workloads().values()
        if w.pod not in mine
    ]
    return EstateStatus(file=str(path), pods=rows, unplanned=others)


def _with_usage(ctx: RuntimeContext, rows: list[PodStatus]) -> list[PodStatus]:
    """`usage` on each running row: one CPU/memory reading of all of them together (about a second)."""
    running = [r.name for r in rows if r.running and r.state != "other-estate"]
    found = ctx.runtime.usage(running) if running else {}
    return [r.model_copy(update={"usage": found.get(r.name)}) if r.name in found else r for r in rows]


def _with_engine_metrics(rows: list[PodStatus]) -> list[PodStatus]:
    """`metrics` / `metrics_error` on each serving row: one scrape of its /metrics (so the rates,
    which need two, are null here; the cockpit's live view has them)."""
    from backend import http_probe
    from backend.live.engine_metrics import read_pod

    out = []
    with http_probe.client(2.0) as client:
        for row in rows:
            if row.serving:
                found = read_pod(client, row.name, row.port)[0]
                row = row.model_copy(update={"metrics": found.metrics, "metrics_error": found.error})
            out.append(row)
    return out
