"""`pip install ray[default]==V` on every node of a shard, the same version everywhere (`c3 shard install-ray`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, Progress, ProgressSink, problems_of
from backend.actions.registry import register


@register
@dataclass
class InstallRay(Action):
    key = "shard_install_ray"
    doing = "install Ray on {target}"
    nodes: str
    """Registered nodes, comma-separated."""
    version: str | None = None
    """Ray version (default: the one c3 is tested with)."""
    python: str = "python3"
    """The interpreter vLLM runs under, on every node."""
    wheelhouse: str | None = None
    """Install offline from this folder of wheels on the nodes."""
    ssh_key: str | None = None

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> InstallRay:
        return cls(target or "", **(request or {}))

    @property
    def target(self) -> str | None:
        return self.nodes

    @property
    def ray_version(self) -> str:
        from backend.shard.ops import DEFAULT_RAY_VERSION

        return self.version or DEFAULT_RAY_VERSION

    def plan(self) -> Plan:
        source = f" from {self.wheelhouse}" if self.wheelhouse else ""
        return Plan(f"Install Ray on {self.nodes}", (f"on {self.nodes}, one after the other: {self.python} -m pip install ray[default]=={self.ray_version}{source}",
                                                     "then check the version on every node"))

    def problems(self) -> list[Problem]:
        from backend.nodes.registry import resolve_nodes

        return problems_of(lambda: resolve_nodes(self.nodes))

    def run(self, progress: ProgressSink) -> Outcome:
        import asyncio

        from backend.nodes.registry import resolve_nodes
        from backend.shard.ops import install_ray

        def say(line: str) -> None:
            progress(Progress(self.nodes, line, 0.0, line=line))

        asyncio.run(install_ray(resolve_nodes(self.nodes), version=self.ray_version, python=self.python, echo=say, ssh_key=self.ssh_key,
                                wheelhouse=self.wheelhouse))
        return Outcome(True, f"ray[default]=={self.ray_version} installed on {self.nodes}")
