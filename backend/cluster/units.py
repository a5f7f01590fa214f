"""systemd units for the active profile: `c3-cluster.service` runs it, a watchdog service + timer
relaunch it when its endpoint stops answering.

- Starting c3-cluster.service is a deliberate start: it relaunches whatever the active profile names
  (and clears a remembered stop). `Conflicts=` keeps a native single-node unit (vllm.service by
  default) that would compete for the GPUs from running beside it, and `install-service` stands that
  unit down for good (`systemctl disable --now`), shown before it asks; c3 never re-enables it, and
  says how to (`systemctl enable --now UNIT`).
- Stopping it is a deliberate stop: ExecStop runs `c3 profile stop`, which writes the marker the
  watchdog honours until the next launch.
- The API key is not in any unit: put `C3_API_KEY=…` in `$C3_HOME/cluster.env` (0600), which the
  units read with `EnvironmentFile=-`.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from backend import paths
from backend.atomic import write_atomic
from backend.systemd_unit import Unit, check_unit_name, path_value, plain_value

CLUSTER_UNIT = "c3-cluster.service"
WATCHDOG_SERVICE = "c3-cluster-watchdog.service"
WATCHDOG_TIMER = "c3-cluster-watchdog.timer"


@dataclass(frozen=True)
class UnitFile:
    name: str
    text: str


def c3_executable() -> str:
    """Absolute path of the `c3` entry point that units should run."""
    found = shutil.which("c3")
    if found:
        return str(Path(found).resolve())
    candidate = Path(sys.executable).parent / "c3"
    return str(candidate)


def render_units(
    *,
    c3: str | None = None,
    native_unit: str = "vllm.service",
    interval_s: int = 30,
    failures: int = 3,
    cooldown_s: int = 600,
    user: str | None = None,
) -> list[UnitFile]:
    """The three unit files, exactly as they would be written."""
    c3 = c3 or c3_executable()
    home, state = paths.config_home(), paths.state_home()
    native = plain_value(check_unit_name(native_unit, "--native-unit")) if native_unit else ""

    def service(unit: Unit) -> Unit:
        unit.add("Service", "Type", "oneshot")
        return unit

    def common(unit: Unit) -> Unit:
        if user:
            unit.add("Service", "User", plain_value(user))
        unit.environment({"C3_HOME": str(home), "C3_STATE": str(state)})
        return unit.add("Service", "EnvironmentFile", "-" + path_value(str(home / "cluster.env")))

    cluster = Unit().add("Unit", "Description", "c3 cluster: the recipe the active c3 profile names")
    cluster.add("Unit", "Wants", "network-online.target")
    if native:
        cluster.add("Unit", "Conflicts", native).add("Unit", "After", f"network-online.target {native}")
    else:
        cluster.add("Unit", "After", "network-online.target")
    common(service(cluster).add("Service", "RemainAfterExit", "yes"))
    cluster.exec("ExecStart", [c3, "profile", "restart", "--no-wait"])
    cluster.exec("ExecStop", [c3, "profile", "stop", "--reason", CLUSTER_UNIT])
    cluster.add("Service", "TimeoutStartSec", "600").add("Install", "WantedBy", "multi-user.target")

    watchdog = Unit().add("Unit", "Description", "c3 cluster watchdog: relaunch the active profile when its endpoint stops answering")
    watchdog.add("Unit", "After", CLUSTER_UNIT)
    common(service(watchdog)).exec("ExecStart", [c3, "profile", "watchdog-check", "--failures", str(failures), "--cooldown", str(cooldown_s)])

    timer = Unit().add("Unit", "Description", "c3 cluster watchdog timer")
    for key, value in (("OnBootSec", "2min"), ("OnUnitActiveSec", f"{interval_s}s"), ("AccuracySec", "5s"), ("Unit", WATCHDOG_SERVICE)):
        timer.add("Timer", key, value)
    timer.add("Install", "WantedBy", "timers.target")
    return [UnitFile(CLUSTER_UNIT, cluster.text()), UnitFile(WATCHDOG_SERVICE, watchdog.text()), UnitFile(WATCHDOG_TIMER, timer.text())]


def write_units(units: list[UnitFile], unit_dir: Path) -> list[Path]:
    written = []
    for unit in units:
        path = unit_dir / unit.name
        write_atomic(path, unit.text, mode=0o644)
        written.append(path)
    return written


def verify_units(files: list[Path]) -> tuple[bool, str] | None:
    """`systemd-analyze verify` on the files; None when the tool is not installed."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        return None
    result = subprocess.run([tool, "verify", *map(str, files)], capture_output=True, text=True, timeout=60)
    text = (result.stdout + result.stderr).strip()
    return result.returncode == 0, text


def systemd_running() -> bool:
    return Path("/run/systemd/system").is_dir() and shutil.which("systemctl") is not None


def enable_units() -> list[str]:
    """daemon-reload and enable the unit and timer (only where systemd runs)."""
    commands = [["systemctl", "daemon-reload"], ["systemctl", "enable", CLUSTER_UNIT], ["systemctl", "enable", "--now", WATCHDOG_TIMER]]
    done = []
    for cmd in commands:
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=60)
        done.append(shlex.join(cmd))
    return done


@dataclass(frozen=True)
class NativeUnit:
    """The single-node unit c3-cluster.service replaces, as systemctl reports it."""

    name: str
    active: bool
    """`systemctl is-active` said active (or activating)."""
    enabled: bool
    """`systemctl is-enabled` said enabled (it would start again at boot)."""

    @property
    def needs_stand_down(self) -> bool:
        return self.active or self.enabled

    def stand_down_argv(self) -> list[str]:
        return ["systemctl", "disable", "--now", "--", self.name]  # `--`: the name is never an option

    def restore_hint(self) -> str:
        return f"systemctl enable --now {self.name}"


def native_unit_state(name: str) -> NativeUnit | None:
    """What systemctl says about `name`; None when there is no systemctl here."""
    check_unit_name(name, "--native-unit")
    tool = shutil.which("systemctl")
    if tool is None:
        return None

    def ask(verb: str) -> str:
        try:
            result = subprocess.run([tool, verb, "--", name], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return result.stdout.strip().splitlines()[0] if result.stdout.strip() else ""

    return NativeUnit(name, ask("is-active") in ("active", "activating", "reloading"), ask("is-enabled") in ("enabled", "enabled-runtime"))


def stand_down(unit: NativeUnit) -> str:
    """`systemctl disable --now UNIT`; the command line run, or an EnvironmentProblem with its error."""
    from backend.errors import EnvironmentProblem

    argv = unit.stand_down_argv()
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(f"`{shlex.join(argv)}` could not run: {exc}") from None
    if result.returncode != 0:
        said = (result.stderr or result.stdout).strip().splitlines()
        raise EnvironmentProblem(f"`{shlex.join(argv)}` failed: {said[-1] if said else f'exit {result.returncode}'}",
                                 hint="run it yourself with the rights it needs (sudo), then start c3-cluster.service")
    return shlex.join(argv)
