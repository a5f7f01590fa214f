"""`c3 pool install-service`: the router as a systemd unit.

A user unit (`~/.config/systemd/user/`) when not root, a system unit (`/etc/systemd/system/`) as root.
The unit runs the same `c3 pool serve` command line, with `C3_HOME`/`C3_STATE` fixed to the installing
user's folders so the service reads the same node registry. It restarts on failure, and SIGTERM
triggers the router's drain, so `TimeoutStopSec` is the drain timeout plus a margin.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from backend import paths
from backend.settings import current
from backend.systemd_unit import Unit, plain_value


def unit_name(port: int) -> str:
    """`c3-pool-<port>.service`: one unit per listening port."""
    return f"c3-pool-{port}.service"


def unit_dir(system: bool | None = None) -> Path:
    """Where the unit file goes."""
    system = os.geteuid() == 0 if system is None else system
    if system:
        return Path("/etc/systemd/system")
    base = current().xdg_config_home
    return (base or Path.home() / ".config") / "systemd" / "user"


def c3_executable() -> list[str]:
    """How the unit starts c3: the installed `c3` script beside this Python, else `python -m c3`."""
    beside = Path(sys.executable).with_name("c3")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("c3")
    if found:
        return [found]
    return [sys.executable, "-m", "c3"]


def flag_value(value: float | str) -> str:
    # Exact, so the unit runs the very number the user gave (`:g` would round 1234567.5 to 1.23457e+06).
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def option_argv(options: Mapping[str, float | str]) -> list[str]:
    """Flags by long name → ExecStart words, in the given order (`{"--x": 1.5}` → `["--x", "1.5"]`)."""
    argv: list[str] = []
    for flag, value in options.items():
        if not flag.startswith("--"):
            raise ValueError(f"not a long flag: {flag!r}")
        argv += [flag, flag_value(value)]
    return argv


def unit_environment() -> dict[str, str]:
    """A c3 unit's environment: the folders of the c3 that wrote it, and unbuffered output for the journal."""
    return {"C3_HOME": str(paths.config_home()), "C3_STATE": str(paths.state_home()), "PYTHONUNBUFFERED": "1"}


def render_unit(
    nodes: list[str],
    bind: str,
    sticky: str,
    port: int,
    *,
    drain_timeout_s: float = 30.0,
    options: Mapping[str, float | str] | None = None,
    system: bool | None = None,
) -> str:
    """The unit file text (no secrets: nodes are names, keys live in the registry and requests).

    `options` are further `pool serve` flags by long name (`{"--upstream-timeout": 120.0}`), written
    into ExecStart in the given order; `--drain-timeout` comes from `drain_timeout_s` unless given there.
    """
    system = os.geteuid() == 0 if system is None else system
    flags = {"--drain-timeout": drain_timeout_s, **(options or {})}
    drain_timeout_s = float(flags["--drain-timeout"])
    argv = [*c3_executable(), "pool", "serve", "--nodes", ",".join(nodes), "--bind", bind, "--sticky", sticky, *option_argv(flags)]
    unit = Unit(header="Written by `c3 pool install-service`; edit the flags with that command, not by hand.")
    unit.add("Unit", "Description", plain_value(f"c3 pool router on {bind} ({', '.join(nodes)})"))
    unit.add("Unit", "After", "network-online.target").add("Unit", "Wants", "network-online.target")
    unit.add("Service", "Type", "simple").exec("ExecStart", argv).environment(unit_environment())
    for key, value in (("Restart", "on-failure"), ("RestartSec", "2"), ("KillSignal", "SIGTERM"),
                       ("TimeoutStopSec", str(int(drain_timeout_s) + 10)), ("LimitNOFILE", "65536"), ("NoNewPrivileges", "yes")):
        unit.add("Service", key, value)
    unit.add("Install", "WantedBy", "multi-user.target" if system else "default.target")
    return unit.text()


def verify_unit(text: str, name: str) -> tuple[bool | None, str]:
    """Run `systemd-analyze verify` on the unit text: (ok, output); ok is None when the tool is missing."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        return None, "systemd-analyze not found; unit not verified"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text, encoding="utf-8")
        try:
            result = subprocess.run([tool, "verify", str(path)], capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"systemd-analyze did not run: {exc}"
    output = (result.stdout + result.stderr).strip()
    # Without a running systemd (containers, CI) verify still checks syntax and ExecStart but may also
    # complain about the environment; only lines naming our unit file count, and any of them is a
    # problem (systemd "ignores" a bad setting with exit 0, which would leave a unit that misbehaves).
    relevant = [line for line in output.splitlines() if name in line]
    return not relevant, "\n".join(relevant) or output
