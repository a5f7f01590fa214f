"""Run a sticky pool router in the foreground in front of registered nodes (`c3 pool serve`):
SIGTERM/SIGINT drain it and the write ends."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, ProgressSink, problems_of
from backend.actions.registry import register
from backend.errors import C3Error

TUNING = {
    "route": "route", "cache_blocks": "cache_blocks", "cache_min_match": "cache_min_match", "cache_balance_abs": "cache_balance_abs",
    "cache_balance_rel": "cache_balance_rel", "cache_load": "cache_load", "kv_events": "kv_events",
    "probe_interval": "probe_interval_s", "probe_timeout": "probe_timeout_s", "drain_timeout": "drain_timeout_s",
    "load_factor": "load_factor", "pin_ttl": "pin_ttl_s", "upstream_timeout": "upstream_timeout_s",
    "stream_timeout": "stream_timeout_s", "write_timeout": "write_timeout_s", "max_response_time": "max_response_time_s",
    "body_timeout": "body_timeout_s", "max_body_time": "max_body_time_s", "idle_timeout": "idle_timeout_s", "retry_body_limit": "retry_body_limit",
    "max_buffered_bytes": "max_buffered_bytes",
    "hot_key_share": "hot_key_share", "hot_key_window": "hot_key_window", "hot_key_min": "hot_key_min",
}
"""`pool serve`'s tuning flags (by their click parameter name) → the router's `PoolConfig` fields."""


def sticky_mode(text: str) -> str:
    """The canonical form of a `--sticky` value (`auto`, `authorization`, `header:NAME`, `none`);
    UsageError for anything else."""
    from backend.pool.keys import parse_sticky

    return str(parse_sticky(text))


@register
@dataclass
class ServePool(Action):
    key = "pool_serve"
    doing = "start a pool router on {target}"
    nodes: str
    """Registered nodes serving the same model, comma-separated, in ring order."""
    host: str = "0.0.0.0"
    port: int = 8011
    sticky: str = "auto"
    tuning: dict[str, Any] = field(default_factory=dict)
    """Tuning flags by their `pool serve` parameter name (`probe_interval`, …; see `TUNING`)."""

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> ServePool:
        return cls(**request)

    @property
    def target(self) -> str | None:
        return f"{self.host}:{self.port}"

    def config(self) -> Any:
        """The router's `PoolConfig` (sticky mode first, then the nodes, as the CLI always checked them)."""
        from backend.nodes.registry import resolve_nodes
        from backend.pool.router import PoolConfig
        from backend.pool.status import pool_dir

        mode = sticky_mode(self.sticky)
        resolved = resolve_nodes(self.nodes)
        unknown = sorted(set(self.tuning) - set(TUNING))
        if unknown:
            raise ValueError(f"not a pool tuning flag: {', '.join(unknown)}")
        backends = [(n.name, n.host) for n in resolved]
        fields: dict[str, Any] = {TUNING[k]: v for k, v in self.tuning.items()}
        if isinstance(fields.get("kv_events"), str):
            from backend.errors import UsageError
            from backend.pool.kvevents import parse_endpoints

            if fields.get("route") != "cache":
                raise UsageError("--kv-events is read by the cache route only", hint="add --route cache")
            fields["kv_events"] = parse_endpoints(fields["kv_events"], backends)
        return PoolConfig(backends=backends, host=self.host, port=self.port, sticky=mode, state_dir=pool_dir(), **fields)

    def plan(self) -> Plan:
        title = f"Pool router on {self.target}"
        try:
            config = self.config()
        except C3Error as error:
            return Plan(title, (f"start a pool router on {self.target}: {error.message}",))
        lines = [f"listen on {config.host}:{config.port}, sticky {config.sticky}, route {config.route}"]
        lines += [f"backend {name}: {url}" for name, url in config.backends]
        lines.append("run in the foreground; SIGTERM/SIGINT drain open requests, then stop")
        return Plan(title, tuple(lines))

    def problems(self) -> list[Problem]:
        return problems_of(self.config)

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.pool.serve import run_pool

        config = self.config()
        run_pool(config)
        return Outcome(True, f"pool router on {self.target} stopped", data=config)
