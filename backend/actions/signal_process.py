"""Send a signal to one GPU process (`c3 gpus kill PID`, the process view's `T` `K` `I` `H`).

Only a process that is on a GPU now is signalled, by pid, and only the very process the plan showed: its
start time is taken with the plan and checked again just before the signal, so a pid the kernel gave to
a new process in between is refused, not signalled. A process of no c3 pod (foreign) needs an explicit
choice: `--foreign` on the CLI, the gate's own key in the cockpit (`Plan.confirm`). On the simulated
rig the GPU processes are the stub engines' real processes, so the signal is the same `kill(2)` and the
process leaves the simulated GPU when it exits.
"""

from __future__ import annotations

import os
import signal as signals
import time
from dataclasses import dataclass, field
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, ProgressSink
from backend.actions.inputs import ProcessSignal
from backend.actions.registry import register
from backend.actions.workspace import Workspace
from backend.errors import C3Error, Refused

SIGNALS = ("TERM", "KILL", "INT", "HUP")
"""The signals c3 sends (`--signal`); the process view's keys `T` `K` `I` `H`."""
EXIT_WAIT_S = 2.0
"""How long `run` watches for the process to exit, so the result can say whether it did."""


@dataclass(frozen=True)
class SignalResult:
    """What `SignalProcess.run` did (the CLI's `--json`)."""

    pid: int
    signal: str
    gpus: tuple[int, ...]
    pod: str | None
    user: str | None
    command: str | None
    exited: bool
    """The process was gone within EXIT_WAIT_S of the signal."""


@register
@dataclass
class SignalProcess(Action):
    """Signal the GPU process `request.pid` (SIGTERM unless asked otherwise)."""

    key = "signal"
    doing = "signal a GPU process"
    ws: Workspace
    request: ProcessSignal
    _seen: Any = field(default=None, repr=False)
    """The process's start time when it was first looked at (the plan): who the gate showed."""

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> SignalProcess:
        return cls(ws, request)

    @property
    def target(self) -> str | None:
        return f"pid {self.request.pid}"

    def _rows(self) -> list[Any]:
        """This pid's rows of the GPU process listing (one per GPU it holds)."""
        from backend.runtime.gpu_processes import process_rows

        probe = self.ws.ctx.probe
        if probe is None:
            from backend.errors import EnvironmentProblem

            raise EnvironmentProblem(self.ws.ctx.probe_problem or "no GPU probe", hint="c3 needs NVML, or C3_RIG=rig.yaml for a simulated rig")
        snapshots = [s for s in probe.snapshots() if any(p.pid == self.request.pid for p in s.processes)]
        if not snapshots:
            return []
        return process_rows(snapshots, self.ws.pods(), self._owners)

    def _owners(self, pids: Any) -> dict[int, str | None]:
        """The runtime's pid → pod mapping. With Docker unreachable, a process in no container is still
        known to be no pod's (its cgroup says so) and may be signalled; one in a container may be a
        pod's, which only Docker can tell: then the runtime's error stands."""
        from backend.runtime.cgroup import container_id_of_pid

        pids = list(pids)
        try:
            owners: dict[int, str | None] = self.ws.ctx.runtime.owners(pids)
            return owners
        except C3Error:
            if any(container_id_of_pid(pid) is not None for pid in pids):
                raise
            return dict.fromkeys(pids)

    def _who(self) -> tuple[list[Any], int | None]:
        """(rows, start time) now; the start time is remembered the first time (what the plan showed)."""
        from backend.runtime.gpu_processes import proc_start

        rows = [r for r in self._rows() if r.pid == self.request.pid]
        started = proc_start(self.request.pid)
        if self._seen is None and started is not None:
            self._seen = started
        return rows, started

    def plan(self) -> Plan:
        r = self.request
        title = f"Send SIG{r.signal} to pid {r.pid}"
        try:
            rows, _ = self._who()
        except C3Error as error:
            return Plan(title, (f"pid {r.pid}: {error.message}",), destructive=True)
        if not rows:
            return Plan(title, (f"pid {r.pid} is on no GPU now",), destructive=True)
        first = rows[0]
        lines = [f"send SIG{r.signal} to pid {r.pid}: {first.command or '(command not visible from this host)'}",
                 "GPU: " + ", ".join(f"{row.gpu_index} ({'?' if row.used_mib is None else f'{row.used_mib:,}'} MiB)" for row in rows),
                 f"user: {first.user or '?'}"]
        if first.pod is None:
            lines.append("owner: foreign — no c3 pod's process (someone else's job, a desktop, a leftover)")
        else:
            lines.append(f"owner: pod {first.pod} — its engine; Docker may restart it (`c3 pod down {first.pod}` stops the pod)")
        confirm = ("f", "Signal foreign process") if first.pod is None else None
        return Plan(title, tuple(lines), destructive=True, confirm=confirm)

    def problems(self) -> list[Problem]:
        r = self.request
        if r.signal not in SIGNALS:
            return [Problem(f"signal {r.signal} is not one c3 sends", hint=f"use one of {', '.join(SIGNALS)}")]
        try:
            rows, started = self._who()
        except C3Error as error:
            return [Problem(error.message, hint=error.hint)]
        if started is None:
            return [Problem(f"pid {r.pid} has exited", hint="`c3 gpus --processes` lists the processes on the GPUs now")]
        if not rows:
            return [Problem(f"pid {r.pid} is on no GPU", hint="`c3 gpus --processes` lists the processes on the GPUs; c3 signals only those")]
        if started != self._seen:
            return [Problem(f"pid {r.pid} is now another process than the one shown", hint="look again: `c3 gpus --processes`")]
        if rows[0].pod is None and not r.foreign:
            return [Problem(f"pid {r.pid} is no c3 pod's process (foreign: {rows[0].user or '?'}'s {rows[0].command or 'process'})",
                            hint="pass --foreign to signal it anyway")]
        return []

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.runtime.gpu_processes import proc_start

        r = self.request
        first = next((p for p in self.problems() if p.blocking), None)
        if first is not None:  # re-checked at the last moment: the pid must still be the process planned
            raise Refused(first.message, hint=first.hint)
        rows, _ = self._who()
        try:
            os.kill(r.pid, getattr(signals, f"SIG{r.signal}"))
        except ProcessLookupError:
            raise Refused(f"pid {r.pid} has exited", hint="`c3 gpus --processes` lists the processes on the GPUs now") from None
        except PermissionError:
            owner = rows[0].user if rows else None
            raise Refused(f"not permitted to signal pid {r.pid}" + (f" ({owner}'s process)" if owner else ""),
                          hint="run c3 as that user, or as root") from None
        deadline = time.monotonic() + EXIT_WAIT_S
        while proc_start(r.pid) == self._seen and time.monotonic() < deadline:
            time.sleep(0.05)
        exited = proc_start(r.pid) != self._seen
        first_row = rows[0]
        result = SignalResult(r.pid, r.signal, tuple(row.gpu_index for row in rows), first_row.pod, first_row.user, first_row.command, exited)
        whose = f"pod {first_row.pod}" if first_row.pod else "foreign"
        gpus = ",".join(map(str, result.gpus))
        if exited:
            return Outcome(True, f"sent SIG{r.signal} to pid {r.pid} ({whose}, GPU {gpus}): it exited", data=result)
        hint = "SIGKILL ends it for sure" if r.signal != "KILL" else "a process in uninterruptible I/O exits when the I/O ends"
        return Outcome(True, f"sent SIG{r.signal} to pid {r.pid} ({whose}, GPU {gpus}): still running after {EXIT_WAIT_S:g} s", hint, data=result)
