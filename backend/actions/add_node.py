"""Register a node (`c3 node add`, the Nodes mode's `a`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, ProgressSink
from backend.actions.inputs import NewNode
from backend.actions.registry import register


@register
@dataclass
class AddNode(Action):
    """Add one node to `$C3_HOME/nodes.json` (mode 0600), checked as the registry checks it on load."""

    key = "node_add"
    doing = "add a node"
    request: NewNode

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> AddNode:
        return cls(request)

    @property
    def target(self) -> str | None:
        return self.request.name

    def plan(self) -> Plan:
        from backend import paths

        r = self.request
        lines = [f"add node {r.name} to {paths.nodes_file()} (mode 0600):", f"  host     {r.host}", f"  ssh      {r.ssh}",
                 f"  ssh key  {r.ssh_key}" if r.ssh_key else "  ssh key  (the agent's or the default key)"]
        lines.append("driven without SSH (--local)" if r.local else "a node whose host is this machine is driven without SSH")
        return Plan(f"Add node {r.name}", tuple(lines))

    def problems(self) -> list[Problem]:
        from backend.nodes.registry import load_registry, new_node_errors

        r = self.request
        problems = [Problem(e.message, hint=e.hint) for e in new_node_errors(r.name, r.host, r.ssh)]
        if any(n.name.lower() == r.name.lower() for n in load_registry().nodes):
            problems.append(Problem(f"node `{r.name}` is already registered", hint=f"`c3 node rm {r.name}` first"))
        if r.ssh_key and not Path(r.ssh_key).expanduser().is_file():
            problems.append(Problem(f"ssh key {r.ssh_key} is not a file"))
        return problems

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.nodes.registry import add_node

        r = self.request
        node = add_node(r.name, r.host, r.ssh, r.ssh_key or None, local=r.local)
        where = "this machine (no SSH)" if node.local else f"over ssh {node.ssh}"
        return Outcome(True, f"added node {node.name}: {node.host}, driven {where}", "it is probed on the next refresh", data=node)
