"""Install c3-cluster.service (runs the active profile) and its watchdog timer, and stand down the
native single-node unit it replaces (`c3 recipes install-service`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, Progress, ProgressSink, problems_of
from backend.actions.registry import register
from backend.errors import EnvironmentProblem

SYSTEM_UNIT_DIR = Path("/etc/systemd/system")


@register
@dataclass
class InstallClusterService(Action):
    key = "cluster_install_service"
    doing = "install the cluster units in {target}"
    unit_dir: Path = SYSTEM_UNIT_DIR
    native_unit: str = "vllm.service"
    """Competing single-node unit to stand down ('' for none)."""
    interval_s: int = 30
    failures: int = 3
    cooldown_s: int = 600
    user: str | None = None
    _units: list[Any] | None = field(default=None, repr=False)
    _native: tuple[Any] | None = field(default=None, repr=False)

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> InstallClusterService:
        return cls(**(request or {}))

    @property
    def target(self) -> str | None:
        return str(self.unit_dir)

    def units(self) -> list[Any]:
        """The unit files (`name`, `text`), exactly as they would be written."""
        if self._units is None:
            from backend.cluster.units import render_units

            self._units = render_units(native_unit=self.native_unit, interval_s=self.interval_s, failures=self.failures,
                                       cooldown_s=self.cooldown_s, user=self.user)
        return self._units

    def native(self) -> Any:
        """The native unit as systemctl reports it (None without systemctl, or with no native unit)."""
        if self._native is None:
            from backend.cluster.units import native_unit_state

            self._native = (native_unit_state(self.native_unit) if self.native_unit else None,)
        return self._native[0]

    @property
    def stands_down(self) -> bool:
        native = self.native()
        return native is not None and bool(native.needs_stand_down)

    def question(self) -> str:
        """What a confirmation asks about."""
        native = self.native()
        return f"write these {len(self.units())} files to {self.unit_dir}" + (f" and stand down {native.name}" if self.stands_down else "")

    def plan(self) -> Plan:
        lines: list[str] = []
        for unit in self.units():
            lines.append(f"--- {self.unit_dir / unit.name}")
            lines += unit.text.rstrip("\n").split("\n")
        native = self.native()
        if self.native_unit and native is None:
            lines.append(f"--- {self.native_unit}: systemctl is not installed here; stand it down yourself: systemctl disable --now {self.native_unit}")
        elif native is not None and native.needs_stand_down:
            state = ", ".join(w for w, on in (("active", native.active), ("enabled", native.enabled)) if on)
            lines.append(f"--- {native.name} is {state}: it will be stood down: {' '.join(native.stand_down_argv())}")
            lines.append(f"    c3 never re-enables it; to restore it later: {native.restore_hint()}")
        elif native is not None:
            lines.append(f"--- {native.name} is neither active nor enabled: nothing to stand down")
        return Plan(f"Install the cluster units in {self.unit_dir}", tuple(lines), destructive=self.stands_down, wide=True)

    def problems(self) -> list[Problem]:
        # The native unit's name is checked before systemctl is asked anything about it (what
        # systemd-analyze says of the files is known only once they are written).
        from backend.systemd_unit import check_unit_name

        return problems_of(lambda: check_unit_name(self.native_unit, "--native-unit")) if self.native_unit else []

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.cluster.units import enable_units, stand_down, systemd_running, verify_units, write_units

        def say(line: str) -> None:
            progress(Progress("c3-cluster", line, 0.0, line=line))

        written = write_units(self.units(), self.unit_dir)
        verdict = verify_units(written)
        if verdict is None:
            say("systemd-analyze not installed: units not verified")
        elif not verdict[0]:
            raise EnvironmentProblem(f"systemd-analyze verify rejected the units: {verdict[1].splitlines()[0] if verdict[1] else '?'}")
        else:
            say("systemd-analyze verify: ok")
        for path in written:
            say(f"wrote {path}")
        native = self.native()
        if self.stands_down:
            say(f"ran {stand_down(native)} (restore with: {native.restore_hint()})")
        if systemd_running() and self.unit_dir == SYSTEM_UNIT_DIR:
            for line in enable_units():
                say(f"ran {line}")
        else:
            say("systemd is not running here (or a custom --unit-dir): enable with `systemctl enable --now c3-cluster-watchdog.timer`")
        return Outcome(True, f"installed {len(written)} units in {self.unit_dir}", data=written)
