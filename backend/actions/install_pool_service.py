"""Install a pool router as a systemd unit (`c3 pool install-service`): the unit runs exactly the
`pool serve` the user asked for, and is checked with `systemd-analyze verify` before it is written."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from backend.actions.base import Outcome, ProgressSink
from backend.actions.registry import register
from backend.actions.serve_pool import sticky_mode
from backend.actions.unit_install import UnitInstall
from backend.errors import EnvironmentProblem


@register
@dataclass
class InstallPoolService(UnitInstall):
    key = "pool_install_service"
    doing = "install the pool router unit for {target}"
    nodes: str
    bind: str
    """`--bind` as the user wrote it (the unit repeats it)."""
    port: int
    """The port it names (one unit per port)."""
    sticky: str = "auto"
    drain_timeout_s: float = 30.0
    flags: dict[str, float | str] = field(default_factory=dict)
    """Further `pool serve` flags by long name, written into ExecStart in this order."""
    unit_dir: Path | None = None
    """Where to write it (default: systemd's folder, user or system by who runs c3)."""

    @property
    def path(self) -> Path:
        from backend.pool import service

        return (self.unit_dir or service.unit_dir()) / service.unit_name(self.port)

    def text(self) -> str:
        """The unit file (node names only: keys live in the registry and in requests)."""
        from backend.nodes.registry import resolve_nodes
        from backend.pool import service

        mode = sticky_mode(self.sticky)
        names = [n.name for n in resolve_nodes(self.nodes)]
        return service.render_unit(names, self.bind, mode, self.port, drain_timeout_s=self.drain_timeout_s, options=self.flags)

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.atomic import write_atomic

        path = self.path
        try:
            write_atomic(path, self.text(), mode=0o644)
        except OSError as exc:
            raise EnvironmentProblem(f"cannot write {path}: {exc.strerror or exc}") from exc
        scope = "" if path.is_relative_to("/etc/systemd/system") else " --user"
        return Outcome(True, f"wrote {path}", f"next: systemctl{scope} daemon-reload && systemctl{scope} enable --now {path.name}", data=path)
