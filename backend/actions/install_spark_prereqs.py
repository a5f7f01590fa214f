"""Install the packages vLLM's JIT builds need on a DGX Spark with apt-get (`c3 spark install-prereqs`);
needs root or passwordless sudo."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, Progress, ProgressSink
from backend.actions.registry import register


@register
@dataclass
class InstallSparkPrereqs(Action):
    key = "spark_install_prereqs"
    doing = "install the DGX Spark prerequisites"
    _report: Any = field(default=None, repr=False)

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> InstallSparkPrereqs:
        return cls()

    def report(self) -> Any:
        """`c3 spark doctor`'s report, read once for the whole write."""
        if self._report is None:
            from backend.spark import doctor

            self._report = doctor()
        return self._report

    def commands(self) -> list[list[str]]:
        """The apt-get command lines that install what is missing (none when nothing is)."""
        from backend.spark import install_commands

        return install_commands(self.report())

    def plan(self) -> Plan:
        return Plan("Install DGX Spark prerequisites", tuple(" ".join(argv) for argv in self.commands()))

    def problems(self) -> list[Problem]:
        if not self.commands():
            present = ", ".join(i.name for i in self.report().items if i.apt)
            return [Problem(f"nothing to install: {present} are present", "noop")]
        return []

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.spark import install

        def say(line: str) -> None:
            progress(Progress("spark", line, 0.0, line=line))

        if not self.commands():
            return Outcome(True, self.problems()[0].message, data=0)
        rc = install(self.report(), say)
        if rc != 0:
            return Outcome(False, f"apt-get exited {rc}", data=rc)
        return Outcome(True, "installed: " + " ".join(self.report().missing_apt), data=0)
