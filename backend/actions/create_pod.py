"""Plan a new pod in the estate file (`c3 pod create`, the cockpit's `n`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.actions.base import Outcome, Plan, PodFormAction, Problem, ProgressSink
from backend.actions.inputs import NewPod
from backend.actions.registry import register
from backend.actions.workspace import Workspace
from backend.errors import C3Error


@register
@dataclass
class CreatePod(PodFormAction):
    """Append one pod to the estate file, validated with every pod already there."""

    key = "create"
    doing = "create a pod"
    ws: Workspace
    request: NewPod
    force: bool = False
    """Allow experimental/deprecated slugs and a wont-fit verdict."""

    def plan(self) -> Plan:
        r = self.request
        lines = [f"append to {self.ws.estate_path}:", f"  - name: {r.name}", f"    slug: {r.slug}", f"    gpus: [{', '.join(map(str, r.gpus))}]"]
        lines.append(f"    port: {r.port}" if r.port is not None else "    port: (the slug's default, first free)")
        if r.on_demand:
            lines.append("    on_demand: true")
        if r.sleep_mode:
            lines.append("    sleep_mode: true")
        try:
            report = self.ws.fit(r.slug, r.gpus)
            lines.append(f"fit on GPU {_gpu_list(r.gpus)}: {report.verdict}" + (f" ({report.reasons[0]})" if report.reasons else ""))
        except C3Error as error:
            lines.append(f"fit: {error.message}")
        lines.append("nothing starts until you boot it (u)")
        return Plan(f"Create pod {r.name}", tuple(lines))

    def problems(self) -> list[Problem]:
        from backend.estate import plan_pod

        r = self.request
        try:
            planned = plan_pod(self.ws.estate() if self.ws.estate_path.exists() else _empty(), r.name, r.gpus, r.slug,
                               gpus=self.ws.gpus(), catalog=self.ws.catalog(), port=r.port, force=self.force, path=self.ws.estate_path,
                               on_demand=r.on_demand, sleep_mode=r.sleep_mode)
        except C3Error as error:
            return [Problem(error.message, hint=error.hint)]
        except ValueError as error:  # a field the model refuses (pydantic's own message, first line)
            return [Problem(str(error).splitlines()[0])]
        return [Problem(p.message, "warning", p.hint) for p in planned.warnings if p.severity == "warning"]

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.estate import create_pod

        r = self.request
        result = create_pod(self.ws.estate_path, r.name, list(r.gpus), r.slug, gpus=self.ws.gpus(), catalog=self.ws.catalog(), port=r.port, force=self.force,
                            on_demand=r.on_demand, sleep_mode=r.sleep_mode)
        verdict = f", fit {result.fit.verdict}" if result.fit else ""
        notes = "; ".join(w.message for w in result.warnings)
        message = f"created pod {result.pod.name}: {result.pod.slug} on GPU {_gpu_list(result.pod.gpus)}, port {result.pod.port}{verdict}"
        return Outcome(True, message, notes or "press u on it to boot it", data=result)


def _empty() -> Any:
    from backend.models import Estate

    return Estate()


def _gpu_list(gpus: Any) -> str:
    return ",".join(str(i) for i in gpus)
