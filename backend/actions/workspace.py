"""What the pod writes act on — one estate file, one runtime context — and the rules both front ends
used to write twice: what blocks a boot, a pod's health path (`backend.catalog.health`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.errors import EnvironmentProblem, Refused

if TYPE_CHECKING:
    from backend.models import FitReport, Gpu, Pod
    from backend.runtime.context import RuntimeContext

__all__ = ["Workspace", "boot_blockers"]


@dataclass
class Workspace:
    """An estate file and the runtime context the writes use (the cockpit keeps one for its lifetime,
    a CLI command builds one)."""

    estate_path: Path
    context: RuntimeContext | None = None
    """The runtime context; opened on first use when not given (a `pod rm` may never need it)."""
    forced_mode: str | None = None
    """`--gpu-mode` for a context opened here."""
    _catalog: Any = field(default=None, repr=False)

    @property
    def ctx(self) -> RuntimeContext:
        if self.context is None:
            from backend.wiring import open_context

            self.context = open_context(forced_mode=self.forced_mode)
        return self.context

    @property
    def estate_label(self) -> str:
        """How workloads name their estate file (its resolved path)."""
        return str(self.estate_path.resolve())

    def catalog(self) -> Any:
        """The merged catalog, loaded once (shared with the context, which prices the gates)."""
        if self._catalog is None:
            from backend.catalog import load_catalog

            self._catalog = self.ctx.catalog if self.ctx.catalog is not None else load_catalog()
            self.ctx.catalog = self._catalog
        return self._catalog

    def gpus(self) -> list[Gpu]:
        """This machine's GPUs; EnvironmentProblem without a probe (no runtime is opened for this)."""
        if self.context is None:
            from backend.wiring import open_probe

            return list(open_probe().gpus())
        if self.ctx.probe is None:
            raise EnvironmentProblem(self.ctx.probe_problem or "no GPU probe", hint="c3 needs NVML, or C3_RIG=rig.yaml for a simulated rig")
        return list(self.ctx.probe.gpus())

    def gpus_or_none(self) -> list[Gpu] | None:
        """The GPUs, or None when there is no probe (validation then skips the GPU rules, saying so)."""
        return self.ctx.gpus() if self.ctx.probe is not None else None

    def fit(self, slug: str, gpus: tuple[int, ...]) -> FitReport:
        """The fit-check of a slug on exactly these host GPUs (`unknown`, saying why, when the rig
        lacks one of them or the count is not the slug's TP × PP), with this rig's recorded boots of the setup."""
        from backend.fit import fit_on_gpus
        from backend.models import FitReport

        catalog = self.catalog()
        entry = catalog.get(slug)
        by_index = {g.index: g for g in self.gpus()}
        missing = [i for i in gpus if i not in by_index]
        if missing:
            return FitReport(verdict="unknown", reasons=[f"no GPU {','.join(map(str, missing))} on this rig"])
        if len(gpus) != entry.gpu_count:
            return FitReport(verdict="unknown", reasons=[f"{slug} needs {entry.gpu_count} GPU(s) (TP {entry.tp} × PP {entry.pp}); {len(gpus)} chosen"])
        return fit_on_gpus(entry, [by_index[i] for i in gpus], catalog=catalog, learned=True)

    def estate(self) -> Any:
        from backend.estate import load_estate

        return load_estate(self.estate_path)

    def pods(self) -> list[Pod]:
        """The estate's pods; none when the file does not exist yet."""
        if not self.estate_path.exists():
            return []
        return list(self.estate().pods)

    def pod(self, name: str) -> Pod:
        """The pod named `name` (case-insensitively); Refused naming the pods that exist."""
        pods = self.pods()
        found = next((p for p in pods if p.name.casefold() == name.casefold()), None)
        if found is None:
            names = ", ".join(p.name for p in pods) or "none"
            raise Refused(f"pod `{name}` not found in {self.estate_path}", hint=f"pods in the file: {names}")
        return found

    def health_path(self, pod: Pod) -> str:
        """The path that says `pod` serves (`backend.catalog.health`: its entry's, else `/v1/models`)."""
        from backend.catalog.health import health_path

        return health_path(self.catalog, pod)

    def running_pods(self) -> list[str]:
        """The estate's pods that have a workload (running or exited but not removed)."""
        workloads = self.ctx.runtime.workloads()
        return [p.name for p in self.pods() if workloads.get(p.name) and workloads[p.name].status != "absent"]


def gpu_collisions(ws: Workspace, names: list[str]) -> list[Problem]:
    """Two of these pods whose GPU sets collide (on-demand pods may share GPUs in the file, never at
    runtime): one problem per pair of which at least one would start (both running: nothing starts)."""
    from backend.actions.base import Problem

    pods = [ws.pod(n) for n in names]
    runtime = ws.ctx.runtime
    running = {p.name for p in pods if runtime.workload(p.name).running}
    out = []
    for i, a in enumerate(pods):
        for b in pods[i + 1:]:
            shared = sorted(set(a.gpus) & set(b.gpus))
            if shared and not (a.name in running and b.name in running):
                gpus = ",".join(map(str, shared))
                up = next((p.name for p in (a, b) if p.name in running), None)
                first = f"`c3 pod down {up}` first" if up else f"boot one of them (--only {a.name})"
                out.append(Problem(f"pods {a.name} and {b.name} share GPU {gpus}: they are on demand and never run at once",
                                   hint=f"{first}, or let `c3 gateway serve` start each when a request names it"))
    return out


def boot_blockers(ws: Workspace, names: list[str], *, force: bool) -> list[Problem]:
    """Estate rules that refuse booting these pods: blocking problems that involve one of them. An
    invalid *other* pod never blocks; ports are the port gate's business (it knows what runs)."""
    from backend.actions.base import Problem
    from backend.estate import validate_estate

    wanted = {n.casefold() for n in names}
    out = []
    for problem in validate_estate(ws.estate(), ws.gpus_or_none(), ws.catalog(), force=force):
        involved = {p.casefold() for p in ((problem.pod,) if problem.pod else ()) + tuple(problem.pods)}
        if problem.blocking and involved & wanted and problem.code != "port":
            out.append(Problem(problem.message, hint=problem.hint))
    return out


if TYPE_CHECKING:
    from backend.actions.base import Problem
