"""Install the gateway as a systemd unit (`c3 gateway install-service`): the unit runs exactly the
`gateway serve` the user asked for, holds no secret (keys come from its EnvironmentFile), is checked
with `systemd-analyze verify`, and never replaces a different unit unless told to (`--force`)."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from backend.actions.base import Outcome, ProgressSink
from backend.actions.registry import register
from backend.actions.unit_install import UnitInstall
from backend.errors import EnvironmentProblem, Refused, UsageError


def check_env_file(path: Path) -> None:
    """An environment file that exists must be a regular file only its owner can read (it holds keys)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise EnvironmentProblem(f"cannot read the environment file {path}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"the environment file {path} is not a regular file", hint="--env-file names a file of NAME=value lines")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise UsageError(f"the environment file {path} can be read by others (mode {stat.S_IMODE(st.st_mode):o}); it holds keys",
                         hint=f"chmod 600 {path}")


@register
@dataclass
class InstallGatewayService(UnitInstall):
    key = "gateway_install_service"
    doing = "install the gateway unit for {target}"
    bind: str
    """`--bind` as the user wrote it (the unit repeats it)."""
    port: int
    """The port it names (one unit per port)."""
    estate: Path
    """The estate file the gateway routes to (absolute in the unit)."""
    flags: dict[str, float | str] = field(default_factory=dict)
    """Further `gateway serve` flags by long name, written into ExecStart in this order."""
    env_file: Path | None = None
    """The unit's EnvironmentFile (default `$C3_HOME/gateway.env`)."""
    system: bool | None = None
    """A system unit (default: when run as root)."""
    unit_dir: Path | None = None
    """Where to write it (default: systemd's folder for a user or a system unit)."""
    force: bool = False
    """Replace an existing unit of that name that differs."""

    @property
    def system_unit(self) -> bool:
        return os.geteuid() == 0 if self.system is None else self.system

    @property
    def path(self) -> Path:
        from backend.gateway import service
        from backend.pool.service import unit_dir

        return (self.unit_dir or unit_dir(self.system_unit)) / service.unit_name(self.port)

    @property
    def environment_file(self) -> Path:
        from backend.gateway.service import default_env_file

        return (self.env_file or default_env_file()).expanduser().absolute()

    def text(self) -> str:
        """The unit file (paths and flags only: keys live in the environment file)."""
        from backend.gateway.service import render_unit

        return render_unit(self.bind, self.estate.expanduser().absolute(), self.environment_file, options=self.flags, system=self.system_unit)

    def existing(self) -> str | None:
        """The unit file already at `path`, if any."""
        from backend.userfiles import read_text

        # The bounded reader: a FIFO or a device where the unit should be is one error, not a hang.
        return read_text(self.path, what="systemd unit file", missing_ok=True, errors="replace")

    def check(self) -> None:
        """Everything but systemd's own verdict: a readable estate file, a private environment file, and no
        different unit in the way (unless forced)."""
        from backend.estate import load_estate

        load_estate(self.estate.expanduser())
        check_env_file(self.environment_file)
        old = self.existing()
        if old is not None and old != self.text() and not self.force:
            raise Refused(f"{self.path} exists and is a different unit (another `c3 gateway install-service`, or edited by hand)",
                          hint="compare it with --dry-run; --force replaces it")

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.atomic import write_atomic

        self.check()
        path, text = self.path, self.text()
        scope = " --user" if not self.system_unit else ""
        hint = f"next: systemctl{scope} daemon-reload && systemctl{scope} enable --now {path.name}"
        if self.existing() == text:
            return Outcome(True, f"{path} is already this unit", hint, data=path)
        try:
            write_atomic(path, text, mode=0o644)
        except OSError as exc:
            raise EnvironmentProblem(f"cannot write {path}: {exc.strerror or exc}") from exc
        return Outcome(True, f"wrote {path}", hint, data=path)
