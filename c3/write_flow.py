"""The cockpit's write flow, one path for every write: plan (worker) → confirm gate → re-validate and
run (worker) → show the result; plus the boots in flight that the views fold into their pod readings.
A mixin of `C3App` (c3/app.py), kept apart so each module stays about one thing."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from textual.message import Message

from c3.screens.base import describe_error
from c3.services import BootProgress, NewPod, PodEdit, PodState, WritePlan, WriteRequest, WriteResult
from c3.toasts import Toast

_AppBase: Any = object
"""The mixin's `self` is a C3App (boots, served, services, toasts, call…): typed as Any, since naming
the app here would make the two classes each other's base."""


@dataclass
class BootUpdate(Message):
    """Progress of a boot, posted from the worker thread that runs it."""

    progress: BootProgress


@dataclass
class LaunchUpdate(Message):
    """A step of a recipe launch (`progress.pod` is the profile), posted from its worker thread."""

    progress: BootProgress


class WriteFlow(_AppBase):  # type: ignore[misc]  # the base is the app itself (see _AppBase)
    """The write flow's half of `C3App`: every name it uses on `self` is the app's."""

    boots: dict[str, BootProgress]
    served: dict[str, float]
    last_result: WriteResult | None
    launch_progress: BootProgress | None
    # -- the write flow --------------------------------------------------------------------------
    def request_write(self, key: str, *, pod: str | None = None, request: WriteRequest | None = None) -> None:
        """Plan (worker) → confirm gate → re-validate and execute (worker) → show the result.

        `key` names a write of `backend.actions.registry`; the facade builds the action from it."""
        if self.refused_readonly(key, pod) or not self.ready():
            return
        services = self.ready()
        if services is None:
            return

        def plan_failed(error: BaseException) -> None:
            back = isinstance(request, NewPod | PodEdit)
            self._write_failed(error, toast=not back)  # a form that comes back says why itself: no toast over it
            if back:
                self._form_refused(request, describe_error(error))

        self.call(services.make_plan, key, pod, request, done=self._plan_ready, failed=plan_failed, group="plan")

    def _plan_ready(self, plan: WritePlan) -> None:
        from c3.modals.confirm import ConfirmModal

        self.push_screen(ConfirmModal(plan, readonly=self.readonly), callback=lambda ok: self._confirmed(plan, ok))

    def _confirmed(self, plan: WritePlan, ok: bool | None) -> None:
        if not ok:
            if plan.problems and isinstance(plan.request, NewPod | PodEdit):  # back to the pod form that made it
                self._form_refused(plan, plan.problems[0])  # back to the form, which says why (no toast over it)
            else:
                self.notify(f"{plan.title}: cancelled", timeout=3)
            return
        panel = plan.action.progress_panel
        if panel == "boot" and plan.pod:
            self.boots[plan.pod] = BootProgress(plan.pod, "re-checking gates", 0.0)
            self._boots_changed()
        update = LaunchUpdate if panel == "launch" else BootUpdate

        services = self.services
        if services is None:  # cannot happen: the plan came from the facade
            return

        # The write's words and its result share one ordered channel, the app's message queue: every
        # update is posted before the worker posts its result (`call`'s Reply), so each is handled before
        # `finished`. An update from a thread that outlives the write (the boot's log ticker, should its
        # join time out) is dropped once the write has ended: the result is its last word.
        gate = threading.Lock()
        open_ = [True]

        def report(progress: BootProgress) -> None:
            with gate:
                if open_[0]:
                    self.post_message(update(progress))

        def run() -> WriteResult:
            try:
                problems = services.check(plan)
                if problems:
                    return WriteResult(False, f"{plan.title}: {problems[0]}", "; ".join(problems[1:]) or None)
                result: WriteResult = services.execute(plan, report)
                return result
            finally:
                with gate:
                    open_[0] = False

        def finished(result: WriteResult) -> None:
            orch = self._orchestration()
            if result.ok and plan.action.selects and orch is not None:
                orch.select_next = plan.action.selects  # a new pod is what the next key acts on
            boot = self.boots.get(plan.pod) if panel == "boot" and plan.pod else None
            if boot is not None and not boot.done and plan.pod is not None:
                # The write ended without its boot's last word (every word it said was handled before this):
                # a refused or failed write marks the boot failed; one that booted nothing (an edit of a
                # stopped pod) leaves no panel, and no `served` mark for a pod that does not serve.
                if result.ok:
                    self.boots.pop(plan.pod)
                else:
                    self.boots[plan.pod] = BootProgress(plan.pod, "failed", boot.elapsed_s, boot.log_tail, done=True, ok=False)
                self._boots_changed()
            if plan.pods:
                for name in plan.pods:
                    self.boots.pop(name, None)
                self._boots_changed()
            if panel == "launch":
                self._launch_ended(plan, result.ok)
            back = not result.ok and isinstance(plan.request, NewPod)  # only a create carries a NewPod
            self.show_result(result, toast=not back)
            if back:
                self._form_refused(plan, result.message)

        def failed(error: BaseException) -> None:
            if panel == "launch":
                self._launch_ended(plan, False)
            if plan.pod is not None and plan.pod in self.boots:
                boot = self.boots[plan.pod]
                self.boots[plan.pod] = BootProgress(boot.pod, "failed", boot.elapsed_s, boot.log_tail, done=True, ok=False)
                self._boots_changed()
            self._write_failed(error)

        self.call(run, done=finished, failed=failed, group=f"write-{plan.action.key}-{plan.pod or ''}")

    def _write_failed(self, error: BaseException, *, toast: bool = True) -> None:
        message = describe_error(error)
        text, _, hint = message.partition(" — hint: ")
        self.show_result(WriteResult(False, text, hint or None), toast=toast)

    def _launch_ended(self, plan: WritePlan, ok: bool) -> None:
        """The launch panel says how a write that reported into it ended. A recipe launch says so itself;
        a profile restart or switch only reports its steps, and its panel read "◐ launching" for good."""
        progress = self.launch_progress
        if progress is None or progress.done or (plan.pod is not None and progress.pod != plan.pod):
            return
        ended = replace(progress, phase="serving" if ok else "failed", done=True, ok=ok, line=None)
        self.on_launch_update(LaunchUpdate(ended))

    def on_launch_update(self, message: LaunchUpdate) -> None:
        progress = message.progress
        previous = self.launch_progress
        if not progress.log_tail:  # a relaunch says one line a step: the panel keeps its last four
            running = previous is not None and previous.pod == progress.pod and not previous.done
            tail = previous.log_tail if running and previous is not None else ()
            progress = replace(progress, log_tail=(*tail, progress.line)[-4:] if progress.line else tail)
        self.launch_progress = progress
        for screen in self._mode_screens("recipes"):
            shown = getattr(screen, "show_launch", None)
            if shown is not None and screen.is_mounted:
                shown(progress)

    def on_boot_update(self, message: BootUpdate) -> None:
        progress = message.progress
        if progress.done and progress.ok:
            self.boots.pop(progress.pod, None)
            self.served[progress.pod] = time.monotonic()
        else:
            self.boots[progress.pod] = progress
            self.served.pop(progress.pod, None)
        self._boots_changed()

    def as_shown(self, pods: list[PodState]) -> list[PodState]:
        """Pod readings as every view shows them beside the boot panel (boot_panel.as_shown)."""
        from c3.screens.boot_panel import SETTLE_S, as_shown

        now = time.monotonic()
        # A boot's word outranks older readings only until one reading has caught up (says serving):
        # after that a `down` is news (the pod was stopped), not a reading from before the boot.
        caught_up = {p.name for p in pods if p.state == "serving"}
        self.served = {name: at for name, at in self.served.items() if now - at < SETTLE_S and name not in caught_up}
        return as_shown(pods, self.boots, self.served, now)

    def _boots_changed(self) -> None:
        orch = self._orchestration()
        if orch is not None and orch.is_mounted:
            orch.boots_changed()
            orch.poll_now()
        for screen in self.screen_stack:  # a modal that shows a pod's state (details) follows too
            changed = getattr(screen, "boots_changed", None)
            if changed is not None and screen is not orch and screen.is_mounted:
                changed()

    def show_result(self, result: WriteResult, *, toast: bool = True) -> None:
        """Every write's outcome reaches the user: a toast, the result line, and a fresh poll. Its hint
        is said in the cockpit's keys and fields, not the CLI's flags (c3/hints.py)."""
        from c3.hints import cockpit_hint
        from c3.look import shown

        result = replace(result, hint=cockpit_hint(result.hint))
        self.last_result = result
        self.results.append(result)
        del self.results[:-50]
        text = shown(result.message) + (f"\nhint: {shown(result.hint)}" if result.hint else "")
        if toast:  # under a modal it waits (c3/toasts.py): a result is news about the estate, not the form
            self.toasts.post(Toast(text, "Done" if result.ok else "Refused", "information" if result.ok else "error", 6 if result.ok else 10))
        orch = self._orchestration()
        if orch is not None and orch.is_mounted:
            orch.show_result()
            orch.poll_now()
        for screen in self.screen_stack:  # a modal that wrote (the process view's signal) says the result itself
            said = getattr(screen, "write_result", None)
            if said is not None and screen.is_mounted:
                said(result)
        for mode in ("nodes", "recipes"):
            for screen in self._mode_screens(mode):
                show = getattr(screen, "show_result", None)
                if show is not None and screen.is_mounted:
                    show(result)
                    screen.poll_now()
