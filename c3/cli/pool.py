"""`c3 pool`: a sticky, failure-aware router in front of nodes serving the same model."""

from __future__ import annotations

import re
from pathlib import Path

import click

from backend.errors import EnvironmentProblem, Refused, UsageError
from c3.cli.common import emit_json, json_option


def parse_bind(text: str) -> tuple[str, int]:
    """`:8011`, `8011`, `HOST:PORT` or `[V6]:PORT` → (host, port); `:PORT` listens on every interface."""
    value = text.strip()
    if value.isdigit():
        value = ":" + value
    match = re.fullmatch(r"(?:\[(?P<v6>[0-9a-fA-F:.]+)\]|(?P<host>[A-Za-z0-9_.-]*))?:?(?P<port>\d{1,5})", value)
    if not match or (":" not in value and (match.group("host") or match.group("v6"))):
        raise UsageError(f"--bind `{text}` is not [HOST]:PORT", hint="e.g. --bind :8011 or --bind 127.0.0.1:8011")
    port = int(match.group("port"))
    if not 0 < port < 65536:
        raise UsageError(f"--bind `{text}`: port must be 1-65535")
    host = match.group("v6") or match.group("host") or "0.0.0.0"
    return host, port


def _resolve(nodes: str):
    from backend.nodes.registry import resolve_nodes

    return resolve_nodes(nodes)


def _sticky(value: str) -> str:
    from backend.pool.keys import parse_sticky

    return str(parse_sticky(value))


@click.group("pool")
def pool() -> None:
    """Replicas behind one sticky, failure-aware OpenAI endpoint."""


@pool.command("serve")
@click.option("--nodes", required=True, help="Registered nodes serving the same model, e.g. a,b.")
@click.option("--bind", default=":8011", show_default=True, help="[HOST]:PORT to listen on (`:PORT` = all interfaces).")
@click.option("--sticky", default="auto", show_default=True, help="auto | authorization | header:NAME | none.")
@click.option("--probe-interval", type=click.FloatRange(min=0.05), default=2.0, show_default=True, help="Seconds between health probes.")
@click.option("--probe-timeout", type=click.FloatRange(min=0.05), default=2.0, show_default=True, help="Timeout of one probe.")
@click.option("--drain-timeout", type=click.FloatRange(min=0), default=30.0, show_default=True, help="On SIGTERM/SIGINT, seconds open requests may finish.")
@click.option("--load-factor", type=click.FloatRange(min=1.0), default=1.25, show_default=True, help="Bounded load for new sessions (× average).")
@click.option("--pin-ttl", type=click.FloatRange(min=1), default=6 * 3600.0, show_default=True, help="Seconds an idle session stays pinned.")
def serve(nodes: str, bind: str, sticky: str, probe_interval: float, probe_timeout: float, drain_timeout: float, load_factor: float, pin_ttl: float) -> None:
    """Run the router in the foreground (SIGTERM/SIGINT: drain, then exit 0)."""
    from backend.pool.router import PoolConfig
    from backend.pool.serve import run_pool
    from backend.pool.status import pool_dir

    host, port = parse_bind(bind)
    mode = _sticky(sticky)
    resolved = _resolve(nodes)
    config = PoolConfig(
        backends=[(n.name, n.host) for n in resolved], host=host, port=port, sticky=mode,
        probe_interval_s=probe_interval, probe_timeout_s=probe_timeout, drain_timeout_s=drain_timeout,
        load_factor=load_factor, pin_ttl_s=pin_ttl, state_dir=pool_dir(),
    )
    run_pool(config)


def _fmt_ms(value) -> str:
    return "-" if value is None else f"{value:.1f}"


@pool.command("status")
@json_option
def status(as_json: bool) -> None:
    """Per-backend health, in-flight, requests, errors and latency of every running router."""
    from backend.pool.status import read_pools

    pools = read_pools()
    if as_json:
        backends = []
        for p in pools:
            for b in p.backends:
                backends.append({"pool": p.bind, **b.model_dump()})
        emit_json({"pools": [p.model_dump(exclude={"backends"}) for p in pools], "backends": backends})
        return
    if not pools:
        raise Refused("no pool router is running", hint="start one: c3 pool serve --nodes a,b --bind :8011")
    for p in pools:
        ratio = "-" if p.sticky_hit_ratio is None else f"{p.sticky_hit_ratio:.0%}"
        click.echo(f"pool {p.bind}  pid {p.pid}  sticky {p.sticky}  pins {p.pins}  hit ratio {ratio}  up {p.uptime_s:.0f}s")
        if not p.reachable:
            click.echo(f"  ⚠ router does not answer on {p.admin_url}: {p.error}")
            continue
        click.echo(f"  {'node':<14} {'state':<9} {'in-flight':>9} {'requests':>9} {'errors':>7} {'retries':>7} {'repins':>6} {'pins':>6} {'p50 ms':>7} {'p99 ms':>7}  url")
        for b in p.backends:
            state = b.state + ("/drain" if b.draining else "")
            mark = "✓" if b.healthy else "×"
            click.echo(
                f"{mark} {b.node:<14} {state:<9} {b.in_flight:>9} {b.requests:>9} {b.errors:>7} {b.retries:>7} {b.repins:>6} {b.pins:>6} "
                f"{_fmt_ms(b.latency_ms.get('p50')):>7} {_fmt_ms(b.latency_ms.get('p99')):>7}  {b.url}"
            )
            if not b.healthy and b.last_error:
                click.echo(f"    last error: {b.last_error}")


@pool.command("install-service")
@click.option("--nodes", required=True, help="Registered nodes serving the same model, e.g. a,b.")
@click.option("--bind", default=":8011", show_default=True, help="[HOST]:PORT to listen on.")
@click.option("--sticky", default="auto", show_default=True, help="auto | authorization | header:NAME | none.")
@click.option("--drain-timeout", type=click.FloatRange(min=0), default=30.0, show_default=True, help="Drain time on stop.")
@click.option("--unit-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write the unit here instead of systemd's folder (user unit, or system unit as root).")
@click.option("--dry-run", is_flag=True, help="Show the unit and where it would go; write nothing.")
def install_service(nodes: str, bind: str, sticky: str, drain_timeout: float, unit_dir: Path | None, dry_run: bool) -> None:
    """Install the router as a systemd unit (user unit unless root); the unit text is shown first."""
    from backend.atomic import write_atomic
    from backend.pool import service

    host, port = parse_bind(bind)
    mode = _sticky(sticky)
    resolved = _resolve(nodes)
    names = [n.name for n in resolved]
    name = service.unit_name(port)
    text = service.render_unit(names, bind, mode, port, drain_timeout_s=drain_timeout)
    path = (unit_dir or service.unit_dir()) / name
    click.echo(f"# {path}")
    click.echo(text, nl=False)
    ok, output = service.verify_unit(text, name)
    if ok is None:
        click.echo(f"# {output}")
    elif not ok:
        raise Refused(f"systemd-analyze verify rejected the unit: {output.splitlines()[0] if output else 'unknown error'}")
    else:
        click.echo("# systemd-analyze verify: ok")
    if dry_run:
        click.echo("# dry run: nothing written")
        return
    try:
        write_atomic(path, text, mode=0o644)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot write {path}: {exc.strerror or exc}") from exc
    scope = "" if path.is_relative_to("/etc/systemd/system") else " --user"
    click.echo(f"wrote {path}")
    click.echo(f"next: systemctl{scope} daemon-reload && systemctl{scope} enable --now {name}")
