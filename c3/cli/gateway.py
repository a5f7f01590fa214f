"""`c3 gateway`: one OpenAI-compatible endpoint for every pod of the estate, routed by model name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from backend.errors import Refused
from c3.cli.common import echo_line, emit_json, file_option, given_flags, install_unit, json_option
from c3.cli.pool import parse_bind


@click.group("gateway")
def gateway() -> None:
    """One OpenAI endpoint for the estate's pods: routes by model name, starts a stopped pod on demand."""


# `gateway serve`'s tuning options, shared with `install-service` so the unit runs exactly what the user asked for.
SERVE_OPTIONS = (
    click.option("--idle-ttl", "idle_ttl", type=click.FloatRange(min=0), default=0.0, show_default=True,
                 help="Stop a pod the gateway started once unused for this many seconds (0: never). Pods it did not start are never stopped."),
    click.option("--queue", "queue_limit", type=click.IntRange(1, 100000), default=64, show_default=True,
                 help="Requests held per pod while it starts or waits for a swap; more are answered 429 (503 while held for a swap)."),
    click.option("--boot-timeout", "boot_timeout", type=click.FloatRange(min=1), default=900.0, show_default=True,
                 help="Seconds a pod started on demand may take to serve; then its held requests get 503 with its last log lines."),
    click.option("--min-residency", "min_residency", type=click.FloatRange(min=0), default=30.0, show_default=True,
                 help="Seconds an on-demand pod runs before the gateway may stop it to start another on its GPUs (no thrash)."),
    click.option("--swap-wait", "swap_wait", type=click.FloatRange(min=0), default=120.0, show_default=True,
                 help="Seconds a request is held while its pod's GPUs are held by pods not yet stoppable (requests in flight, "
                      "--min-residency); then 503 with Retry-After. 0: answer 429 with Retry-After at once."),
    click.option("--api-key-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                 help="A 0600 file with the key clients must send as `Authorization: Bearer KEY` (else $C3_GATEWAY_API_KEY; else none)."),
)


def serve_options(func: Any) -> Any:
    for option in reversed(SERVE_OPTIONS):
        func = option(func)
    return func


@gateway.command("serve")
@click.option("--bind", default="127.0.0.1:8012", show_default=True, help="[HOST]:PORT to listen on (`:PORT` = all interfaces).")
@serve_options
@file_option
def serve(bind: str, idle_ttl: float, queue_limit: int, boot_timeout: float, min_residency: float, swap_wait: float,
          api_key_file: Path | None, file: Path | None) -> None:
    """Run the gateway in the foreground (SIGTERM/SIGINT stop it; pods keep running).

    POST /v1/chat/completions, /v1/completions and /v1/embeddings go to the pod that the body's `model`
    names (a pod's name, or a model a pod serves); a stopped pod is booted as `c3 pod up` boots it (every
    gate, GPU pinning, placement) and the request is held until it serves. GET /v1/models lists both
    kinds of name with each pod's state.

    On-demand pods that share GPUs are swapped: a request for one whose GPUs another holds stops that one
    first. When it has requests in flight or ran less than --min-residency, the request is held (up to
    --swap-wait, at most --queue per pod; past either: 503 with Retry-After) and forwarded once the swap
    is done; a pod not on demand is never stopped (503).
    """
    from backend.actions import refuse_on
    from backend.actions.serve_gateway import ServeGateway
    from backend.actions.workspace import Workspace
    from backend.views.estate_file import estate_path

    host, port = parse_bind(bind)
    action = ServeGateway(Workspace(estate_path(file)), host, port, idle_ttl_s=idle_ttl, queue_limit=queue_limit, boot_timeout_s=boot_timeout,
                          min_residency_s=min_residency, swap_wait_s=swap_wait, api_key_file=api_key_file)
    action.config()  # a bad key file or estate file keeps its own exit code (2), which a problem would turn into 1
    refuse_on(action.problems())
    action.run(echo_line)


@gateway.command("status")
@json_option
def status(as_json: bool) -> None:
    """Per pod of every running gateway: state, queue depth, started by the gateway, last start and how long it took."""
    from backend.views.gateway import clock_time, running_gateways, swap_line

    found = running_gateways()
    if as_json:
        emit_json({"gateways": [g.model_dump(mode="json") for g in found]})
        return
    if not found:
        raise Refused("no gateway is running", hint="start one: c3 gateway serve")
    for g in found:
        ttl = f"{g.idle_ttl_s:g}s" if g.idle_ttl_s else "off"
        click.echo(f"gateway {g.bind}  pid {g.pid}  idle ttl {ttl}  min residency {g.min_residency_s:g}s  swap wait {g.swap_wait_s:g}s  {'API key required' if g.auth else 'no API key'}")
        if g.last_swap is not None:
            click.echo(f"  last swap: {swap_line(g.last_swap)}")
        click.echo(f"  {'pod':<20} {'state':<14} {'queue':>5} {'in-flight':>9} {'by gw':>5} {'last start':>10} {'took':>7}  models")
        for m in g.models:
            took = "-" if m.last_start_s is None else f"{m.last_start_s:.1f}s"
            click.echo(f"  {m.pod:<20} {m.state:<14} {m.queue_depth:>5} {m.in_flight:>9} {'yes' if m.started_by_gateway else 'no':>5} "
                       f"{clock_time(m.last_start_at):>10} {took:>7}  {', '.join(n for n in m.models if n != m.pod)}")
            if m.last_swap is not None:
                click.echo(f"    last swap: {swap_line(m.last_swap)}")
            if m.held_for:
                click.echo(f"    held: {m.queue_depth} request(s) wait for a swap: {m.held_for}")
            if m.last_error:
                click.echo(f"    last error: {m.last_error}")


@gateway.command("litellm-config")
@click.option("--url", default="http://127.0.0.1:8012", show_default=True, help="The gateway's address, as LiteLLM reaches it.")
@click.option("--api-key-env", "key_env", default="C3_GATEWAY_API_KEY", show_default=True,
              help="The variable LiteLLM reads the gateway's key from (written as os.environ/NAME; the key itself never is).")
@file_option
def litellm_config(url: str, key_env: str, file: Path | None) -> None:
    """Print a LiteLLM proxy config (model_list) routing every pod and model name of the estate to the gateway."""
    from backend.actions.serve_gateway import litellm_config_text
    from backend.actions.workspace import Workspace
    from backend.views.estate_file import estate_path

    click.echo(litellm_config_text(Workspace(estate_path(file)), url, key_env), nl=False)


@gateway.command("install-service")
@click.option("--bind", default="127.0.0.1:8012", show_default=True, help="[HOST]:PORT the gateway listens on (`:PORT` = all interfaces).")
@serve_options
@file_option
@click.option("--env-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The unit's EnvironmentFile, for C3_GATEWAY_API_KEY / VLLM_API_KEY (default $C3_HOME/gateway.env; mode 0600).")
@click.option("--system/--user", "system", default=None, help="A system unit (/etc/systemd/system) or a user unit (default: system only as root).")
@click.option("--unit-dir", type=click.Path(file_okay=False, path_type=Path), default=None, help="Write the unit here instead of systemd's folder.")
@click.option("--force", is_flag=True, help="Replace an existing unit of that name that differs.")
@click.option("--dry-run", is_flag=True, help="Show the unit and where it would go; write nothing.")
def install_service(bind: str, file: Path | None, env_file: Path | None, system: bool | None, unit_dir: Path | None, force: bool, dry_run: bool,
                    **tuning: Any) -> None:
    """Install the gateway as a systemd unit (the unit text is shown first; keys stay in --env-file)."""
    from backend.actions.install_gateway_service import InstallGatewayService
    from backend.actions.serve_gateway import read_key_file
    from backend.views.estate_file import estate_path

    if tuning.get("api_key_file") is not None:
        read_key_file(tuning["api_key_file"])  # a key file the service could not use is refused now, not at boot
    _host, port = parse_bind(bind)
    action = InstallGatewayService(bind, port, estate_path(file), given_flags(tuning), env_file, system, unit_dir, force)
    old = action.existing()
    if not dry_run:
        action.check()  # the estate, the environment file, a different unit in the way: refused before anything is shown
    differs = old is not None and old != action.text()
    install_unit(action, dry_run, f"{action.path} exists and differs: installing this one needs --force" if differs else None)
