"""Edit a pod in place: new GPUs, port or slug (`c3 pod edit`, the cockpit's `e`).

The edited pod passes every rule a new one does (`backend.estate.plan_edit` runs `plan_pod` on it
against the other pods), or nothing is written. A running pod keeps running its old settings until it
restarts, so editing one restarts it — stop, then boot with the new plan (the boot's own gates and
placement check) — and the plan says so before anything happens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.actions.base import Outcome, Plan, PodFormAction, Problem, ProgressSink
from backend.actions.inputs import PodEdit
from backend.actions.registry import register
from backend.actions.workspace import Workspace
from backend.errors import C3Error


@dataclass(frozen=True)
class EditOutcome:
    """What `EditPod.run` did (the CLI's `--json`)."""

    result: Any
    """`backend.estate.EditResult`: the pod before and after, its fit, the warnings."""
    restarted: bool | None
    """None: the pod was not running; True: stopped and booted again; False: the boot failed."""
    boot: Outcome | None = None


@register
@dataclass
class EditPod(PodFormAction):
    """Change one pod of the estate file; restart it when it runs."""

    key = "edit"
    doing = "edit {target}"
    progress_panel = "boot"
    ws: Workspace
    request: PodEdit
    force: bool = False
    """Allow experimental/deprecated slugs and a wont-fit verdict (as `pod create --force`)."""
    timeout_s: float = 900.0

    @property
    def target(self) -> str | None:
        return self.request.name

    def planned(self) -> Any:
        """The edited pod checked against the others (`backend.estate.PlannedPod`); raises the refusal
        with its own class (UsageError: nothing to change, Refused: a rule) so a CLI exits by it."""
        from backend.estate import plan_edit

        r = self.request
        return plan_edit(self.ws.estate(), r.name, gpu_indices=r.gpus, slug=r.slug, port=r.port, gpus=self.ws.gpus(), catalog=self.ws.catalog(),
                         force=self.force, path=self.ws.estate_path)

    def running(self) -> bool | None:
        """Whether the pod's workload runs now; None when the runtime cannot tell (Docker unreachable)."""
        try:
            return bool(self.ws.ctx.runtime.workload(self.ws.pod(self.request.name).name).running)
        except Exception:  # noqa: BLE001 - an unreachable daemon must not block editing the plan
            return None

    def plan(self) -> Plan:
        r = self.request
        title = f"Edit pod {r.name}"
        try:
            before = self.ws.pod(r.name)
        except C3Error as error:
            return Plan(title, (error.message,))
        lines = [f"edit pod {before.name} in {self.ws.estate_path}:"]
        after_slug = r.slug or before.slug
        after_gpus = r.gpus if r.gpus is not None else before.gpus
        after_port = r.port if r.port is not None else before.port
        for field, old, new in (("slug", before.slug, after_slug), ("gpus", _gpus(before.gpus), _gpus(after_gpus)), ("port", before.port, after_port)):
            lines.append(f"  {field}: {old} → {new}" if old != new else f"  {field}: {old} (unchanged)")
        try:
            report = self.ws.fit(after_slug, tuple(after_gpus))
            lines.append(f"fit on GPU {','.join(map(str, after_gpus))}: {report.verdict}" + (f" ({report.reasons[0]})" if report.reasons else ""))
        except C3Error as error:
            lines.append(f"fit: {error.message}")
        running = self.running()
        if running:
            lines.append(f"pod {before.name} is running: it will RESTART — stopped now, then booted with the new settings")
        elif running is None:
            lines.append(f"could not tell whether pod {before.name} runs: if it does, it keeps its old settings until `c3 pod down`/`up`")
        else:
            lines.append("nothing starts until you boot it (u)")
        return Plan(title, tuple(lines), destructive=bool(running))

    def problems(self) -> list[Problem]:
        try:
            planned = self.planned()
        except C3Error as error:
            return [Problem(error.message, hint=error.hint)]
        except ValueError as error:  # a field the model refuses (pydantic's own message, first line)
            return [Problem(str(error).splitlines()[0])]
        if planned.pod == self.ws.pod(self.request.name):
            return [Problem(f"pod {planned.pod.name}: nothing to change", "noop")]
        found = [Problem(p.message, "warning", p.hint) for p in planned.warnings if p.severity == "warning"]
        if self.running():
            found.append(Problem(f"pod {planned.pod.name} is running: editing it restarts it", "warning"))
        return found

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.actions.boot_pods import BootPods
        from backend.actions.stop_pod import StopPod
        from backend.estate import edit_pod

        r = self.request
        running = self.running()
        result = edit_pod(self.ws.estate_path, r.name, gpus=self.ws.gpus(), catalog=self.ws.catalog(), gpu_indices=r.gpus, slug=r.slug, port=r.port,
                          force=self.force)
        p = result.pod
        said = f"edited pod {p.name}: {p.slug} on GPU {_gpus(p.gpus)}, port {p.port}"
        if not running or result.pod == result.before:
            hint = "; ".join(w.message for w in result.warnings) or None
            return Outcome(True, said if result.pod != result.before else f"pod {p.name}: nothing changed", hint,
                           data=EditOutcome(result, None))
        StopPod(self.ws, p.name, planned=True).run(progress)
        try:
            boot = BootPods(self.ws, (p.name,), force=self.force, timeout_s=self.timeout_s).run(progress)
        except C3Error as error:  # a boot gate refused the new settings: the edit stands, the pod is down
            return Outcome(False, f"{said}; the restart was refused: {error.message}", error.hint, data=EditOutcome(result, False))
        if boot.ok:
            return Outcome(True, f"{said}; restarted", data=EditOutcome(result, True, boot))
        return Outcome(False, f"{said}; the restart failed: {boot.message}", boot.hint, data=EditOutcome(result, False, boot))


def _gpus(gpus: Any) -> str:
    return "[" + ", ".join(map(str, gpus)) + "]"
