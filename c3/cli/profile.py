"""`c3 profile ls|status|logs|restart|stop|env|switch|set|unset|watchdog-check`: act on launched recipes."""

from __future__ import annotations

import shlex

import click

from c3.cli.common import echo_line, emit_json, json_option


@click.group("profile")
def profile() -> None:
    """Launched recipe profiles; most commands act on the active one unless NAME is given."""


@profile.command("ls")
@json_option
def ls(as_json: bool) -> None:
    """List profiles (the active one marked *)."""
    from backend.views.profiles import profile_list

    listing = profile_list()
    if as_json:
        emit_json(listing.model_dump(mode="json"))
        return
    if not listing.profiles:
        click.echo("no profiles (c3 recipes launch ID --nodes a,b)")
        return
    for p in listing.profiles:
        mark = "*" if p.active else " "
        stopped = "  [stopped]" if p.stopped else ""
        click.echo(f"{mark} {p.name}  {p.base_url}  nodes {','.join(p.nodes)}  {p.status}{stopped}")


@profile.command("status")
@click.argument("name", required=False)
@json_option
def status(name: str | None, as_json: bool) -> None:
    """Each node's container and rank 0's endpoint."""
    from backend.views.profiles import profile_status
    from backend.views.recipes import recipe_detail

    view = profile_status(name)
    if as_json:
        emit_json(view.model_dump(mode="json"))
        return
    click.echo(f"{view.name}: {view.status}; recipe {view.recipe}{'  [deliberately stopped]' if view.stopped else ''}")
    if view.overrides:
        click.echo("  overrides: " + ", ".join(f"{k}={v}" for k, v in view.overrides.items()))
    elif view.status == "verified recipe":
        m = recipe_detail(view.recipe).measured
        if m and m.tokens_per_s is not None:
            click.echo(f"  verified numbers: {m.tokens_per_s:g} tok/s single stream")
    for n in view.nodes:
        click.echo(f"  {n.node:<12} rank {n.rank}  {n.state}")
    click.echo(f"  endpoint {'serving' if view.serving else 'not answering'}: {view.endpoint}")


@profile.command("logs")
@click.argument("name", required=False)
@click.option("--node", default=None, help="Which node's rank (default: rank 0).")
@click.option("--tail", type=int, default=100, show_default=True)
@click.option("--follow", "-f", is_flag=True)
def logs(name: str | None, node: str | None, tail: int, follow: bool) -> None:
    """A rank's container log."""
    from backend.views.profiles import profile_log

    profile_log(name, click.echo, node=node, tail=tail, follow=follow)


@profile.command("restart")
@click.argument("name", required=False)
@click.option("--no-wait", is_flag=True, help="Do not wait for rank 0 to answer.")
@click.option("--timeout", type=float, default=None)
def restart(name: str | None, no_wait: bool, timeout: float | None) -> None:
    """Relaunch the whole group (with the profile's overrides)."""
    from backend.actions.restart_profile import RestartProfile

    click.echo(RestartProfile(name, wait=not no_wait, timeout_s=timeout).run(echo_line).message)


@profile.command("stop")
@click.argument("name", required=False)
@click.option("--reason", default="c3 profile stop", help="Recorded in the stop marker.")
def stop(name: str | None, reason: str) -> None:
    """Stop the group and remember it (the watchdog leaves it stopped until the next launch)."""
    from backend.actions.stop_profile import StopProfile

    p = StopProfile(name, reason).run(echo_line).data
    click.echo(f"stopped {p.name} (remembered until the next launch)")


@profile.command("env")
@click.argument("name", required=False)
def env(name: str | None) -> None:
    """`export` lines for OpenAI clients (base URL, model, the variable holding the key), ready to eval."""
    from backend.views.profiles import profile_env

    # Users eval this output: the view refuses a variable name edited into the profile file before
    # anything is printed.
    p = profile_env(name)
    click.echo(f"export OPENAI_BASE_URL={shlex.quote(p.base_url)}")
    click.echo(f"export OPENAI_MODEL={shlex.quote(p.model)}")
    if p.api_key_env:
        # The name only: the shell expands it, so the key never passes through c3's output.
        click.echo(f'export OPENAI_API_KEY="${{{p.api_key_env}}}"')
        click.echo(f"# the API key is read from ${p.api_key_env}")


@profile.command("switch")
@click.argument("name")
@click.option("--no-wait", is_flag=True)
@click.option("--timeout", type=float, default=None)
def switch(name: str, no_wait: bool, timeout: float | None) -> None:
    """Stop the active profile, then launch NAME and make it active."""
    from backend.actions.switch_profile import SwitchProfile

    click.echo(SwitchProfile(name, wait=not no_wait, timeout_s=timeout).run(echo_line).message)


@profile.command("set")
@click.argument("name")
@click.argument("pairs", nargs=-1, required=True, metavar="KEY=VALUE...")
def set_(name: str, pairs: tuple[str, ...]) -> None:
    """Override recipe parameters in a profile (applied at the next restart; demotes it to recipe + local overrides)."""
    from backend.actions.profile_overrides import SetProfileOverrides

    click.echo(SetProfileOverrides(name, pairs).run(echo_line).message)


@profile.command("unset")
@click.argument("name")
@click.argument("keys", nargs=-1, required=True)
def unset(name: str, keys: tuple[str, ...]) -> None:
    """Drop overrides from a profile."""
    from backend.actions.profile_overrides import UnsetProfileOverrides

    click.echo(UnsetProfileOverrides(name, keys).run(echo_line).message)


@profile.command("watchdog-check")
@click.argument("name", required=False)
@click.option("--failures", type=int, default=3, show_default=True)
@click.option("--cooldown", type=float, default=600, show_default=True)
@click.option("--grace", type=float, default=None, help="Start-up grace seconds (default: the recipe's).")
@json_option
def watchdog_check(name: str | None, failures: int, cooldown: float, grace: float | None, as_json: bool) -> None:
    """One watchdog round (what the systemd timer runs)."""
    from backend.actions.watchdog_round import WatchdogRound

    result = WatchdogRound(name, failures, cooldown, grace).run(echo_line).data
    if as_json:
        emit_json({"action": result.action, "profile": result.profile, "detail": result.detail, "failures": result.failures})
    else:
        click.echo(result.line())
