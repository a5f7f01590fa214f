"""Run one vLLM server across nodes with Ray or vLLM's multiprocessing executor, in the foreground
(`c3 shard start`; Ctrl+C stops every node's part)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, Progress, ProgressSink, problems_of
from backend.actions.registry import register
from backend.errors import C3Error, UsageError
from backend.shard.models import NO_AUTH as RPC_NO_AUTH  # `shard start --help` says it

__all__ = ["RPC_NO_AUTH", "StartShard"]

RAY_WORKER_PORTS = range(10002, 20000)
"""Ray's default worker port range: the GCS and torch rendezvous ports must stay outside it."""


@register
@dataclass
class StartShard(Action):
    key = "shard_start"
    doing = "start the shard {target}"
    profile: str
    """A shard profile in `$C3_HOME/profiles/` (model, args, env), or `MODEL [vllm args]`."""
    nodes: str
    """Registered nodes, comma-separated."""
    tp: int | None = None
    """Tensor-parallel size (default: the profile's, else 1)."""
    pp: int | None = None
    """Pipeline-parallel size (default: the profile's, else 2)."""
    backend: str | None = None
    """`ray` or `mp` (default: the profile's, else ray)."""
    port: int | None = None
    """The head's OpenAI API port (default: the profile's, else 8000)."""
    ray_port: int = 6379
    master_port: int = 29501
    options: dict[str, Any] = field(default_factory=dict)
    """The other `ShardOptions` fields as given (`head`, `vllm`, `ray`, `python`, `gpus_per_node`, …)."""
    ssh_key: str | None = None
    dry_run: bool = False
    """Run the checks and print every node's commands; start nothing."""
    deadlines: list[str] = field(default_factory=list)
    """`PHASE=SECONDS` deadlines over the defaults (`reach`, `link`, `rendezvous`, `load`; backend.shard.phases)."""

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> StartShard:
        return cls(target or "", **request)

    @property
    def target(self) -> str | None:
        return self.profile

    def shard_options(self) -> Any:
        """The run's `ShardOptions`: the flags over the profile's values over the defaults."""
        from backend.shard.plan import ShardOptions
        from backend.shard.profile import load_profile

        prof = load_profile(self.profile)
        for name, value in (("--ray-port", self.ray_port), ("--master-port", self.master_port)):
            if value in RAY_WORKER_PORTS:
                raise UsageError(f"{name} {value} is inside Ray's worker port range 10002–19999")
        return ShardOptions(
            backend=self.backend or prof.backend or "ray", tp=self.tp or prof.tp or 1, pp=self.pp or prof.pp or 2,
            api_port=self.port or prof.port or 8000, ray_port=self.ray_port, master_port=self.master_port,
            model=prof.model, args=prof.args, env=prof.env, public_env=prof.public_env, **self.options,
        )

    def plan(self) -> Plan:
        title = f"Start the shard {self.profile}"
        try:
            o = self.shard_options()
        except C3Error as error:
            return Plan(title, (f"start the shard {self.profile}: {error.message}",))
        return Plan(title, (f"serve {o.model} across {self.nodes}: TP {o.tp} × PP {o.pp} with the {o.backend} executor, API port {o.api_port}",
                            "check every node first; `c3 shard start --dry-run` prints each node's commands"))

    def problems(self) -> list[Problem]:
        from backend.nodes.registry import resolve_nodes

        return problems_of(self.shard_options, lambda: resolve_nodes(self.nodes))

    def run(self, progress: ProgressSink) -> Outcome:
        """Blocks while the shard serves; `data` is the exit code the CLI ends with."""
        import asyncio

        from backend.nodes.registry import resolve_nodes
        from backend.shard.ops import start
        from backend.shard.phases import parse_deadline, timing_with

        options = self.shard_options()
        timing = timing_with(dict(parse_deadline(d) for d in self.deadlines))

        def say(line: str) -> None:
            progress(Progress(self.profile, line, 0.0, line=line))

        code = asyncio.run(start(resolve_nodes(self.nodes), options, echo=say, dry_run=self.dry_run, ssh_key=self.ssh_key, timing=timing))
        return Outcome(code == 0, f"shard {self.profile} ended with exit code {code}", data=code)
