"""`c3 gateway install-service`: the gateway as a systemd unit.

A user unit (`~/.config/systemd/user/`) or a system unit (`/etc/systemd/system/`), one per port
(`c3-gateway-<port>.service`). The unit runs the same `c3 gateway serve` command line, with the estate
file's absolute path and `C3_HOME`/`C3_STATE` fixed to the installing user's folders. It holds no secret:
`C3_GATEWAY_API_KEY`, `VLLM_API_KEY` and the like come from `EnvironmentFile=` (default
`$C3_HOME/gateway.env`, optional: `-`), a file only its owner may read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from backend import paths
from backend.pool.service import c3_executable, option_argv, unit_environment
from backend.systemd_unit import Unit, path_value, plain_value


def unit_name(port: int) -> str:
    """`c3-gateway-<port>.service`: one unit per listening port."""
    return f"c3-gateway-{port}.service"


def default_env_file() -> Path:
    """`$C3_HOME/gateway.env`: where the unit reads the gateway's and the engines' keys from."""
    return paths.config_home() / "gateway.env"


def render_unit(bind: str, estate: Path, env_file: Path, *, options: Mapping[str, float | str] | None = None, system: bool | None = None) -> str:
    """The unit file text. `options` are further `gateway serve` flags by long name, in the given order."""
    system = os.geteuid() == 0 if system is None else system
    argv = [*c3_executable(), "gateway", "serve", "--bind", bind, "--file", str(estate), *option_argv(options or {})]
    unit = Unit(header="Written by `c3 gateway install-service`; edit the flags with that command, not by hand.\n"
                       f"Keys (C3_GATEWAY_API_KEY, VLLM_API_KEY) go in {env_file}, mode 0600, never here.")
    unit.add("Unit", "Description", plain_value(f"c3 gateway on {bind} ({estate})"))
    unit.add("Unit", "After", "network-online.target").add("Unit", "Wants", "network-online.target")
    unit.add("Service", "Type", "simple").exec("ExecStart", argv).environment(unit_environment())
    unit.add("Service", "EnvironmentFile", "-" + path_value(str(env_file)))
    # SIGTERM stops the gateway at once (pods keep running); held requests are answered by the close.
    for key, value in (("Restart", "on-failure"), ("RestartSec", "2"), ("KillSignal", "SIGTERM"), ("TimeoutStopSec", "20"),
                       ("LimitNOFILE", "65536"), ("NoNewPrivileges", "yes")):
        unit.add("Service", key, value)
    unit.add("Install", "WantedBy", "multi-user.target" if system else "default.target")
    return unit.text()
