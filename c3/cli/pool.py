"""`c3 pool`: a sticky, failure-aware router in front of nodes serving the same model."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from backend.errors import Refused, UsageError
from c3.cli.common import PORT, echo_line, emit_json, given_flags, install_unit, json_option


def parse_bind(text: str) -> tuple[str, int]:
    """`:8011`, `8011`, `HOST:PORT` or `[V6]:PORT` → (host, port); `:PORT` listens on every interface. The
    port is `backend.limits`' rule, as for every port flag."""
    from backend.models.ports import port_text

    value = text.strip()
    match = re.fullmatch(r"(?:\[(?P<v6>[0-9a-fA-F:.]+)\]|(?P<host>[A-Za-z0-9_.-]*)):(?P<port>[^:]*)", value if ":" in value else ":" + value)
    if not match:
        raise UsageError(f"--bind `{text}` is not [HOST]:PORT", hint="e.g. --bind :8011 or --bind 127.0.0.1:8011")
    try:
        port = port_text(match.group("port"))
    except ValueError as error:
        raise UsageError(f"--bind `{text}`: {error}", hint="e.g. --bind :8011 or --bind 127.0.0.1:8011") from None
    host = match.group("v6") or match.group("host") or "0.0.0.0"
    return host, port


@click.group("pool")
def pool() -> None:
    """Replicas behind one sticky, failure-aware OpenAI endpoint."""


def _seconds(flag: str, default: float, text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A time limit option of `pool serve` (seconds, at least 0.05)."""
    return click.option(flag, type=click.FloatRange(min=0.05), default=default, show_default=True, help=text)


# `pool serve`'s options, shared with `install-service` so the unit runs exactly what the user asked for.
# Every option after --sticky is a tuning flag: `install-service` renders those the user gave into ExecStart.
SERVE_OPTIONS = (
    click.option("--nodes", required=True, help="Registered nodes serving the same model, e.g. a,b."),
    click.option("--bind", default=":8011", show_default=True, help="[HOST]:PORT to listen on (`:PORT` = all interfaces)."),
    click.option("--sticky", default="auto", show_default=True, help="auto (per conversation: X-Session-ID, the body's user, else the conversation's prefix) | authorization | header:NAME | none."),
    click.option("--route", type=click.Choice(["ring", "cache"]), default="ring", show_default=True,
                 help="ring (new sessions by bounded-load consistent hashing) | cache (to the backend holding the prompt's longest prefix, within a balance bound)."),
    click.option("--cache-blocks", type=click.IntRange(min=1), default=16_384, show_default=True,
                 help="--route cache: prompt prefix blocks (256 bytes each) remembered per backend."),
    click.option("--cache-min-match", type=click.FloatRange(min=0.0, max=1.0), default=0.5, show_default=True,
                 help="--route cache: share of a prompt's blocks a backend must hold to get it."),
    click.option("--cache-balance-abs", type=click.IntRange(min=0), default=1, show_default=True,
                 help="--route cache: follow a prefix while its backend, counting the request, has at most this many more in flight than the least loaded (or is within --cache-balance-rel)."),
    click.option("--cache-balance-rel", type=click.FloatRange(min=1.0), default=1.5, show_default=True,
                 help="--route cache: or at most this × the least loaded backend's in flight; past both bounds the least loaded backend gets the request."),
    click.option("--cache-load", type=click.Choice(["engine", "in-flight"]), default="engine", show_default=True,
                 help="--route cache: engine (leave a prefix's backend only while its engine queues requests: "
                      "vllm:num_requests_waiting / llamacpp:requests_deferred from its /metrics, read every second; a backend "
                      "whose /metrics cannot be read falls back to the in-flight bound, shown in `pool status`) | in-flight "
                      "(the router's in-flight counts only)."),
    click.option("--kv-events", default=None, metavar="PORT|NAME=tcp://HOST:PORT,…",
                 help="--route cache: read each vLLM backend's KV-cache events (its --kv-events-config ZMQ endpoint; a "
                      "PORT means every backend's host at that port) and forget from the prefix index what the engine "
                      "evicts or clears."),
    click.option("--probe-interval", type=click.FloatRange(min=0.05), default=2.0, show_default=True, help="Seconds between health probes."),
    click.option("--probe-timeout", type=click.FloatRange(min=0.05), default=2.0, show_default=True, help="Timeout of one probe."),
    click.option("--drain-timeout", type=click.FloatRange(min=0), default=30.0, show_default=True, help="On SIGTERM/SIGINT, seconds open requests may finish."),
    click.option("--load-factor", type=click.FloatRange(min=1.0), default=1.25, show_default=True, help="Bounded load for new sessions (× average)."),
    click.option("--pin-ttl", type=click.FloatRange(min=1), default=6 * 3600.0, show_default=True, help="Seconds an idle session stays pinned."),
    _seconds("--upstream-timeout", 300.0, "Seconds to wait for a backend's response head (then retry elsewhere, body held, or 504) and its first body bytes."),
    _seconds("--stream-timeout", 60.0, "Seconds a response may go without bytes after its first body bytes; then the client connection closes."),
    _seconds("--write-timeout", 60.0, "Seconds a client may leave its answer unread; then it is dropped and the backend request closed."),
    _seconds("--max-response-time", 3600.0, "Seconds one response may take in all, from the request sent to its last byte."),
    _seconds("--body-timeout", 60.0, "Seconds to wait for the next bytes of a request body; then 408 and the connection closes."),
    _seconds("--max-body-time", 600.0, "Seconds a whole request body may take to arrive; then 408 and the connection closes."),
    _seconds("--idle-timeout", 75.0, "Seconds a client connection may sit idle, or take to send a request head, before it is closed."),
    click.option("--retry-body-limit", type=click.IntRange(min=0), default=8 * 1024 * 1024, show_default=True,
                 help="Request bodies up to this many bytes are held (and can be retried); larger ones stream."),
    click.option("--max-buffered-bytes", type=click.IntRange(min=0), default=64 * 1024 * 1024, show_default=True,
                 help="Held request bytes across all connections; past it bodies stream (retried only on connect errors)."),
    click.option("--hot-key-share", type=click.FloatRange(min=0.01, max=1.0), default=0.5, show_default=True,
                 help="Flag a key with more than this share of a backend's recent requests."),
    click.option("--hot-key-window", type=click.IntRange(min=1), default=200, show_default=True, help="Recent requests per backend for the hot-key share."),
    click.option("--hot-key-min", type=click.IntRange(min=1), default=20, show_default=True, help="Fewest requests of one key before it can be flagged."),
)


# Written into the unit even at their defaults, so an operator reading it sees every time limit (--drain-timeout
# also because TimeoutStopSec is derived from it).
ALWAYS_IN_UNIT = frozenset({"drain_timeout", "body_timeout", "idle_timeout", "stream_timeout", "write_timeout", "max_body_time",
                            "max_response_time"})


def serve_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Apply SERVE_OPTIONS to a click command (listed in --help in the order above)."""
    for option in reversed(SERVE_OPTIONS):
        func = option(func)
    return func


@pool.command("serve")
@serve_options
def serve(nodes: str, bind: str, sticky: str, route: str, cache_blocks: int, cache_min_match: float, cache_balance_abs: int,
          cache_balance_rel: float, cache_load: str, kv_events: str | None,
          probe_interval: float, probe_timeout: float, drain_timeout: float, load_factor: float, pin_ttl: float,
          upstream_timeout: float, stream_timeout: float, write_timeout: float, max_response_time: float, body_timeout: float,
          max_body_time: float, idle_timeout: float, retry_body_limit: int, max_buffered_bytes: int, hot_key_share: float, hot_key_window: int, hot_key_min: int) -> None:
    """Run the router in the foreground (SIGTERM/SIGINT: drain, then exit 0)."""
    from backend.actions.serve_pool import ServePool

    host, port = parse_bind(bind)
    tuning: dict[str, float | str] = {
              "route": route, "cache_blocks": cache_blocks, "cache_min_match": cache_min_match, "cache_balance_abs": cache_balance_abs,
              "cache_balance_rel": cache_balance_rel, "cache_load": cache_load,
              **({"kv_events": kv_events} if kv_events is not None else {}),
              "probe_interval": probe_interval, "probe_timeout": probe_timeout, "drain_timeout": drain_timeout, "load_factor": load_factor,
              "pin_ttl": pin_ttl, "upstream_timeout": upstream_timeout, "stream_timeout": stream_timeout, "write_timeout": write_timeout,
              "max_response_time": max_response_time, "body_timeout": body_timeout, "max_body_time": max_body_time, "idle_timeout": idle_timeout,
              "retry_body_limit": retry_body_limit, "max_buffered_bytes": max_buffered_bytes, "hot_key_share": hot_key_share, "hot_key_window": hot_key_window, "hot_key_min": hot_key_min}
    ServePool(nodes, host, port, sticky, tuning).run(echo_line)


def _engine_line(load: Any) -> str:
    """`--cache-load engine`: what the cache route's balance bound reads for a backend."""
    if load.read:
        return f"engine queue ({load.engine}): {load.waiting} waiting, {load.running if load.running is not None else '?'} running, {load.age_s:.1f}s ago"
    return f"engine queue unread ({load.error}): balanced by the router's in-flight count"


def _kv_line(kv: Any) -> str:
    """`--kv-events`: what the engine's KV-cache events said, or that none came."""
    if kv.last_event_age_s is None:
        return f"kv events: none yet from {kv.endpoint} (is the engine's --kv-events-config endpoint tcp://*:PORT?)"
    line = (f"kv events: engine holds {kv.engine_blocks} blocks seen stored, {kv.removed} evicted, {kv.cleared} cleared; "
            f"{kv.trimmed} index entries dropped; last {kv.last_event_age_s:.0f}s ago")
    if kv.gaps or kv.bad:
        line += f" (⚠ {kv.gaps} lost, {kv.bad} unreadable)"
    return line


def _fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


@pool.command("status")
@json_option
def status(as_json: bool) -> None:
    """Per-backend health, in-flight, requests, errors and latency of every running router."""
    from backend.views.pools import running_pools

    skipped: list[str] = []
    pools = running_pools(skipped=skipped)
    for why in skipped:  # stderr: `--json` output stays one document
        click.echo(f"⚠ {why}", err=True)
    if as_json:
        backends = []
        for p in pools:
            for b in p.backends:
                backends.append({"pool": p.bind, **b.model_dump()})
        hot = [{"pool": p.bind, **h.model_dump()} for p in pools for h in p.hot_keys]
        emit_json({"pools": [p.model_dump(exclude={"backends", "hot_keys"}) for p in pools], "backends": backends, "hot_keys": hot})
        return
    if not pools:
        raise Refused("no pool router is running", hint="start one: c3 pool serve --nodes a,b --bind :8011")
    for p in pools:
        ratio = "-" if p.sticky_hit_ratio is None else f"{p.sticky_hit_ratio:.0%}"
        click.echo(f"pool {p.bind}  pid {p.pid}  sticky {p.sticky}  pins {p.pins}  hit ratio {ratio}  up {p.uptime_s:.0f}s")
        if not p.reachable:
            click.echo(f"  ⚠ router does not answer on {p.admin_url}: {p.error}")
            continue
        click.echo(f"  {'node':<14} {'state':<13} {'in-flight':>9} {'requests':>9} {'errors':>7} {'retries':>7} {'repins':>6} {'pins':>6} {'p50 ms':>7} {'p99 ms':>7}  url")
        for b in p.backends:
            state = b.state if not b.draining else ("draining" if b.healthy else b.state + "/draining")
            if b.suspect and not b.draining:
                state += "?"  # up, but failing lately (see last error)
            mark = "✓" if b.healthy else "×"
            click.echo(
                f"{mark} {b.node:<14} {state:<13} {b.in_flight:>9} {b.requests:>9} {b.errors:>7} {b.retries:>7} {b.repins:>6} {b.pins:>6} "
                f"{_fmt_ms(b.latency_ms.get('p50')):>7} {_fmt_ms(b.latency_ms.get('p99')):>7}  {b.url}"
            )
            if (not b.healthy or b.suspect) and b.last_error:
                click.echo(f"    last error: {b.last_error}")
            if b.engine_load is not None:
                click.echo(f"    {_engine_line(b.engine_load)}")
            if b.kv_events is not None:
                click.echo(f"    {_kv_line(b.kv_events)}")
        for h in p.hot_keys:
            click.echo(f"  ⚠ hot key {h.key_hash} on {h.backend}: {h.share:.0%} of its last {h.window} requests "
                       "(one API key or session is most of this node's load; stickiness keeps it there)")


def _admin_write(undrain: bool, node: str, bind: str | None, port: int | None) -> Any:
    """Run the drain/undrain write on the router `--bind`/`--port` names, or the only one running."""
    from backend.actions.drain_pool_node import DrainPoolNode, UndrainPoolNode

    if bind is not None and port is not None:
        raise UsageError("give --bind or --port, not both")
    host = None
    if bind is not None:
        host, port = parse_bind(bind)
    write = UndrainPoolNode if undrain else DrainPoolNode
    return write(node, host, port).run(echo_line).data


def _drain_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--port", type=PORT, default=None, help="The router listening on this port.")(func)
    func = click.option("--bind", default=None, help="The router started with this --bind ([HOST]:PORT).")(func)
    return click.argument("node")(func)


@pool.command("drain")
@_drain_options
@json_option
def drain(node: str, bind: str | None, port: int | None, as_json: bool) -> None:
    """Stop new sessions and unkeyed requests going to NODE; its sessions move once idle."""
    done = _admin_write(False, node, bind, port)
    where, doc = done.pool, done.answer
    if as_json:
        emit_json({"pool": where, **doc})
        return
    click.echo(f"draining {doc['node']} in pool {where}: {doc['in_flight']} in flight, {doc['pins']} pinned sessions "
               "(each moves on its next request once it has nothing in flight)")
    click.echo(f"undo: c3 pool undrain {doc['node']}" + (f" --port {where.rsplit(':', 1)[-1]}" if bind or port else ""))


@pool.command("undrain")
@_drain_options
@json_option
def undrain(node: str, bind: str | None, port: int | None, as_json: bool) -> None:
    """Let NODE take new sessions again (sessions that moved away stay where they are)."""
    done = _admin_write(True, node, bind, port)
    where, doc = done.pool, done.answer
    if as_json:
        emit_json({"pool": where, **doc})
        return
    click.echo(f"{doc['node']} takes new sessions again in pool {where} (state {doc['state']})")


@pool.command("install-service")
@serve_options
@click.option("--unit-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write the unit here instead of systemd's folder (user unit, or system unit as root).")
@click.option("--dry-run", is_flag=True, help="Show the unit and where it would go; write nothing.")
def install_service(nodes: str, bind: str, sticky: str, unit_dir: Path | None, dry_run: bool, **tuning: float | str) -> None:
    """Install the router as a systemd unit (user unit unless root); the unit text is shown first."""
    from backend.actions.install_pool_service import InstallPoolService

    _host, port = parse_bind(bind)
    action = InstallPoolService(nodes, bind, port, sticky, float(tuning["drain_timeout"]), given_flags(tuning, ALWAYS_IN_UNIT), unit_dir)
    install_unit(action, dry_run)
