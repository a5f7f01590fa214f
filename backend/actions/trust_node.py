"""Trust a node's SSH host key: fetch what it offers, check it, add it to `$C3_HOME/known_hosts`
(`c3 node trust`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, Progress, ProgressSink
from backend.actions.registry import register
from backend.errors import C3Error, Refused


@register
@dataclass
class TrustNode(Action):
    key = "node_trust"
    doing = "trust node {target}"
    name: str
    fingerprint: str | None = None
    """Trust only a key with this `SHA256:…` fingerprint (checked on the node's console)."""
    approve: Callable[[Any], bool] | None = field(default=None, repr=False)
    """Asked with the offered key when no fingerprint is given; None trusts what is offered."""

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> TrustNode:
        return cls(target or "", fingerprint=request if isinstance(request, str) else None)

    @property
    def target(self) -> str | None:
        return self.name

    def _node(self) -> Any:
        from backend.nodes.registry import resolve_nodes

        (node,) = resolve_nodes([self.name])
        return node

    def plan(self) -> Plan:
        from backend import paths

        check = f"only if it is {self.fingerprint}" if self.fingerprint else "after you compare its fingerprint"
        return Plan(f"Trust node {self.name}", (f"fetch the SSH host key node {self.name} offers", f"add it to {paths.config_home() / 'known_hosts'} {check}"))

    def problems(self) -> list[Problem]:
        try:
            node = self._node()
        except C3Error as error:
            return [Problem(error.message, hint=error.hint)]
        if node.local:
            return [Problem(f"node {self.name} is this machine: no SSH, nothing to trust", "noop")]
        return []

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.remote.fleet import run_sync
        from backend.remote.known_hosts import trust_host_key
        from backend.remote.ssh import fetch_host_key

        node = self._node()
        if node.local:
            return Outcome(True, f"node {self.name} is this machine: no SSH, nothing to trust")
        offered = run_sync(fetch_host_key(node))
        said = f"node {self.name} ({node.ssh}) offers {offered.key_type} {offered.fingerprint}"
        progress(Progress(self.name, said, 0.0, line=said))
        if offered.already_trusted:
            return Outcome(True, "already trusted", data=offered)
        if self.fingerprint is not None:
            if self.fingerprint.strip() != offered.fingerprint:
                raise Refused(f"node `{self.name}` offers {offered.fingerprint}, not {self.fingerprint}", hint="nothing was trusted; check which machine answers at that address")
        elif self.approve is not None and not self.approve(offered):
            raise Refused("host key not trusted")
        path = trust_host_key(offered)
        return Outcome(True, f"trusted: added to {path}", data=offered)
