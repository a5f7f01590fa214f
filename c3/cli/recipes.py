"""`c3 recipes list|show|launch|stop|install-service`."""

from __future__ import annotations

import click

from c3.cli.common import echo_line, emit_json, json_option


@click.group("recipes")
def recipes() -> None:
    """Configurations run and measured on named hardware, launched across nodes over SSH."""


@recipes.command("list")
@json_option
def list_(as_json: bool) -> None:
    """What is tested, and on what."""
    from backend.views.recipes import recipe_list

    items = recipe_list()
    if as_json:
        emit_json({"recipes": [r.model_dump(mode="json") for r in items]})
        return
    if not items:
        click.echo("no recipes")
        return
    # Status first: whether the numbers can be trusted matters before anything else on the line.
    items.sort(key=lambda r: (not r.verified, r.id))
    width = max(len(r.id) for r in items)
    click.echo(f"{'STATUS':<10}  {'ID':<{width}}  NODES  HARDWARE")
    for r in items:
        mark = "verified" if r.verified else "unverified"
        click.echo(f"{mark:<10}  {r.id:<{width}}  {r.nodes:<5}  {r.hardware}")


@recipes.command("show")
@click.argument("recipe_id")
@json_option
def show(recipe_id: str, as_json: bool) -> None:
    """Image, command, provenance, measured numbers and known aborts of one recipe."""
    from backend.views.recipes import recipe_detail

    r = recipe_detail(recipe_id)
    if as_json:
        emit_json(r.model_dump(mode="json"))
        return
    click.echo(f"{r.id}: {r.title}" if r.title else r.id)
    click.echo(f"  model     {r.model}{'@' + r.model_revision if r.model_revision else ''} ({r.engine})")
    click.echo(f"  image     {r.image}{'' if r.image_pinned else '   (not pinned by digest)'}")
    click.echo(f"  nodes     {r.nodes}, rank 0 serves port {r.defaults.get('port')}")
    click.echo(f"  hardware  {r.hardware.description} [{r.hardware.id}]")
    click.echo(f"  command   {' '.join(r.command)}")
    if r.worker_command:
        click.echo(f"  workers   {' '.join(r.worker_command)}")
    click.echo("  params    " + ", ".join(f"{k}={v}" for k, v in r.defaults.items()))
    click.echo(f"  status    {'verified' if r.verified else 'unverified'}")
    if r.provenance:
        p = r.provenance
        click.echo(f"  measured by {p.measured_by}{' on ' + p.measured_on if p.measured_on else ''}, hardware: {p.hardware}")
        if p.source:
            click.echo(f"  source    {p.source}")
        if p.notes:
            click.echo(f"  notes     {p.notes}")
    if r.measured:
        m = r.measured
        parts = []
        if m.tokens_per_s is not None:
            parts.append(f"{m.tokens_per_s:g} tok/s single stream")
        if m.aggregate_tokens_per_s is not None:
            parts.append(f"{m.aggregate_tokens_per_s:g} tok/s aggregate at {m.concurrency or '?'} concurrent")
        if m.ttft_ms is not None:
            parts.append(f"TTFT {m.ttft_ms:g} ms")
        if m.startup_s is not None:
            parts.append(f"start-up {m.startup_s:g} s")
        click.echo("  numbers   " + "; ".join(parts))
    for rule in r.known_aborts:
        click.echo(f"  refuses   {rule.key} {rule.op} {rule.value} on {rule.hardware}: {rule.why}")


@recipes.command("launch")
@click.argument("recipe_id")
@click.option("--nodes", "nodes_arg", required=True, help="Registered nodes, rank 0 first: a,b")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a recipe parameter (demotes to recipe + local overrides).")
@click.option("--name", "name", default=None, help="Profile name (default: the recipe id).")
@click.option("--dry-run", is_flag=True, help="Print every command, node by node (secrets redacted); change nothing.")
@click.option("--allow-unpinned", is_flag=True, help="Launch even though the image is not pinned by digest.")
@click.option("--force", is_flag=True, help="Launch although the nodes' GPUs do not meet the recipe's hardware (a warning instead); never onto GPUs held by running pods.")
@click.option("--no-wait", is_flag=True, help="Return once the containers started; do not wait for rank 0 to answer.")
@click.option("--timeout", "timeout", type=float, default=None, help="Seconds to wait for rank 0 (default: the recipe's start-up grace).")
def launch(recipe_id: str, nodes_arg: str, sets: tuple[str, ...], name: str | None, dry_run: bool,
           allow_unpinned: bool, force: bool, no_wait: bool, timeout: float | None) -> None:
    """Start the recipe's containers on the nodes; writes profile NAME and makes it active.

    One profile is active at a time: once the new nodes pass their checks, the active profile (if it
    is another one) is stopped first, as `c3 profile switch` does; if it cannot be stopped, nothing starts.

    Each rank gets the GPUs the recipe needs, by device id, among its node's free GPUs (never one a
    running pod or profile holds); GPUs that do not meet the recipe's hardware refuse (exit 1) unless --force."""
    from dataclasses import replace

    from backend.actions import RecipeLaunch
    from backend.actions.launch_recipe import LaunchRecipe

    nodes = tuple(n.strip() for n in nodes_arg.split(",") if n.strip())
    action = LaunchRecipe(RecipeLaunch(recipe_id, nodes, allow_unpinned, sets, profile=name, force=force), wait=not no_wait, timeout_s=timeout)
    if dry_run:
        rendered = replace(action, request=replace(action.request, allow_unpinned=True)).render(with_secrets=True, dry_run=True)
        click.echo("dry run: nothing will be changed")
        for line in action.dry_run(rendered):
            click.echo(line)
        return
    result = action.run(echo_line)
    click.echo(result.message)
    click.echo(result.hint)


@recipes.command("stop")
@click.argument("recipe_id")
@click.option("--nodes", "nodes_arg", required=True, help="The nodes it runs on: a,b")
@click.option("--name", "name", default=None, help="Profile name (default: the recipe id).")
def stop(recipe_id: str, nodes_arg: str, name: str | None) -> None:
    """Stop the recipe's containers on those nodes and remember the stop (the watchdog leaves it)."""
    from backend.actions.stop_recipe import StopRecipe

    nodes = tuple(n.strip() for n in nodes_arg.split(",") if n.strip())
    click.echo(StopRecipe(recipe_id, nodes, name).run(echo_line).message)


@recipes.command("install-service")
@click.option("--dry-run", is_flag=True, help="Show the unit files; write nothing.")
@click.option("--yes", "-y", "yes", is_flag=True, help="Write without asking.")
@click.option("--unit-dir", type=click.Path(file_okay=False), default="/etc/systemd/system", show_default=True)
@click.option("--native-unit", default="vllm.service", show_default=True,
              help="Competing single-node unit to stand down with `systemctl disable --now` ('' for none).")
@click.option("--interval", type=int, default=30, show_default=True, help="Watchdog period, seconds.")
@click.option("--failures", type=int, default=3, show_default=True, help="Consecutive failed probes before a relaunch.")
@click.option("--cooldown", type=int, default=600, show_default=True, help="Seconds after a relaunch with no other relaunch.")
@click.option("--user", default=None, help="Run the units as this user.")
def install_service(dry_run: bool, yes: bool, unit_dir: str, native_unit: str, interval: int, failures: int,
                    cooldown: int, user: str | None) -> None:
    """Install c3-cluster.service (runs the active profile) and its watchdog timer, and stand down the
    native single-node unit it replaces (shown first; asks on a TTY, `--yes` for scripts)."""
    import sys
    from pathlib import Path

    from backend.actions.install_cluster_service import InstallClusterService
    from backend.errors import Refused

    action = InstallClusterService(Path(unit_dir), native_unit, interval, failures, cooldown, user)
    for line in action.plan().lines:
        click.echo(line)
    if dry_run:
        click.echo("dry run: nothing written, nothing stopped")
        return
    if not yes:
        if not sys.stdin.isatty():
            raise Refused("not writing unit files without confirmation", hint="review the output above, then pass --yes")
        if not click.confirm(f"{action.question()}?", default=False):
            raise Refused("nothing written")
    action.run(echo_line)
