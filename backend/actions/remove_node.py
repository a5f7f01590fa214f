"""Unregister a node (`c3 node rm`, the Nodes mode's `x`); nothing on the node itself is touched."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, ProgressSink
from backend.actions.registry import register


@register
@dataclass
class RemoveNode(Action):
    key = "node_rm"
    doing = "remove node {target}"
    name: str

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> RemoveNode:
        return cls(target or "")

    @property
    def target(self) -> str | None:
        return self.name

    def plan(self) -> Plan:
        from backend import paths
        from backend.nodes.registry import load_registry
        from backend.profiles import list_profiles

        node = next((n for n in load_registry().nodes if n.name == self.name), None)
        lines = [f"remove node {self.name}" + (f" ({node.host}, ssh {node.ssh})" if node else "") + f" from {paths.nodes_file()}"]
        users = [p.name for p in list_profiles() if self.name in p.nodes]
        if users:
            lines.append(f"profile(s) {', '.join(users)} name this node: they cannot be acted on until it is registered again")
        lines.append("nothing on the node itself is touched")
        return Plan(f"Remove node {self.name}", tuple(lines), destructive=True)

    def problems(self) -> list[Problem]:
        from backend.nodes.registry import load_registry

        if not any(n.name == self.name for n in load_registry().nodes):
            return [Problem(f"node `{self.name}` is not registered", hint="`c3 node ls` lists the registered nodes")]
        return []

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.nodes.registry import remove_node

        node = remove_node(self.name)
        return Outcome(True, f"removed node {node.name} from the registry", data=node)
