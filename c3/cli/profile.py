"""`c3 profile ls|status|logs|restart|stop|env|switch|set|unset|watchdog-check`: act on launched recipes."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

import click

from c3.cli.common import echo_line, emit_json, json_option

if TYPE_CHECKING:
    from backend.profiles import Profile


def _label(p: Profile) -> str:
    from backend.errors import C3Error
    from backend.recipes import get_recipe

    try:
        recipe = get_recipe(p.recipe)
    except C3Error:
        return "recipe missing"
    return p.status_label(recipe.verified, recipe.digest())


@click.group("profile")
def profile() -> None:
    """Launched recipe profiles; most commands act on the active one unless NAME is given."""


@profile.command("ls")
@json_option
def ls(as_json: bool) -> None:
    """List profiles (the active one marked *)."""
    from backend.profiles import active_name, is_stopped, list_profiles

    active = active_name()
    items = list_profiles()
    if as_json:
        emit_json({"active": active, "profiles": [
            {"name": p.name, "recipe": p.recipe, "nodes": p.nodes, "base_url": p.base_url, "model": p.model,
             "overrides": p.overrides, "status": _label(p), "active": p.name == active, "stopped": is_stopped(p.name)}
            for p in items]})
        return
    if not items:
        click.echo("no profiles (c3 recipes launch ID --nodes a,b)")
        return
    for p in items:
        mark = "*" if p.name == active else " "
        stopped = "  [stopped]" if is_stopped(p.name) else ""
        click.echo(f"{mark} {p.name}  {p.base_url}  nodes {','.join(p.nodes)}  {_label(p)}{stopped}")


@profile.command("status")
@click.argument("name", required=False)
@json_option
def status(name: str | None, as_json: bool) -> None:
    """Each node's container and rank 0's endpoint."""
    from backend.cluster.control import status as get_status
    from backend.profiles import is_stopped, resolve
    from backend.recipes import get_recipe
    from backend.remote import run_sync

    p = resolve(name)
    st = run_sync(get_status(p))
    label = _label(p)
    if as_json:
        from backend.views import ProfileStatus, RankStatus

        view = ProfileStatus(name=p.name, recipe=p.recipe, status=label, base_url=p.base_url, model=p.model, overrides=p.overrides,
                             stopped=is_stopped(p.name), serving=st.endpoint_ok, endpoint=st.endpoint_detail,
                             nodes=[RankStatus(node=n.node, rank=n.rank, state=n.state, started_at=n.started_at) for n in st.nodes])
        emit_json(view.model_dump(mode="json"))
        return
    click.echo(f"{p.name}: {label}; recipe {p.recipe}{'  [deliberately stopped]' if is_stopped(p.name) else ''}")
    if p.overrides:
        click.echo("  overrides: " + ", ".join(f"{k}={v}" for k, v in p.overrides.items()))
    elif label == "verified recipe":
        m = get_recipe(p.recipe).measured
        if m and m.tokens_per_s is not None:
            click.echo(f"  verified numbers: {m.tokens_per_s:g} tok/s single stream")
    for n in st.nodes:
        click.echo(f"  {n.node:<12} rank {n.rank}  {n.state}")
    click.echo(f"  endpoint {'serving' if st.endpoint_ok else 'not answering'}: {st.endpoint_detail}")


@profile.command("logs")
@click.argument("name", required=False)
@click.option("--node", default=None, help="Which node's rank (default: rank 0).")
@click.option("--tail", type=int, default=100, show_default=True)
@click.option("--follow", "-f", is_flag=True)
def logs(name: str | None, node: str | None, tail: int, follow: bool) -> None:
    """A rank's container log."""
    from backend.cluster.control import logs as get_logs
    from backend.profiles import resolve
    from backend.remote import run_sync

    p = resolve(name)

    async def go() -> None:
        async for line in get_logs(p, node=node, tail=tail, follow=follow):
            click.echo(line)

    run_sync(go())


@profile.command("restart")
@click.argument("name", required=False)
@click.option("--no-wait", is_flag=True, help="Do not wait for rank 0 to answer.")
@click.option("--timeout", type=float, default=None)
def restart(name: str | None, no_wait: bool, timeout: float | None) -> None:
    """Relaunch the whole group (with the profile's overrides)."""
    from backend.cluster.control import relaunch
    from backend.profiles import resolve
    from backend.remote import run_sync

    p = resolve(name)
    p = run_sync(relaunch(p, wait=not no_wait, wait_timeout_s=timeout, say=click.echo))
    click.echo(f"profile {p.name} relaunched: {p.base_url}")


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
    from backend.profiles import resolve

    p = resolve(name)
    click.echo(f"export OPENAI_BASE_URL={shlex.quote(p.base_url)}")
    click.echo(f"export OPENAI_MODEL={shlex.quote(p.model)}")
    if p.api_key_env:
        from backend.envnames import check_env_name

        # Users eval this output: a name edited into the profile file must not run anything.
        check_env_name(p.api_key_env, f"profile {p.name} api_key_env")
        # The name only: the shell expands it, so the key never passes through c3's output.
        click.echo(f'export OPENAI_API_KEY="${{{p.api_key_env}}}"')
        click.echo(f"# the API key is read from ${p.api_key_env}")


@profile.command("switch")
@click.argument("name")
@click.option("--no-wait", is_flag=True)
@click.option("--timeout", type=float, default=None)
def switch(name: str, no_wait: bool, timeout: float | None) -> None:
    """Stop the active profile, then launch NAME and make it active."""
    from backend.cluster.control import relaunch
    from backend.cluster.control import stop as do_stop
    from backend.errors import C3Error
    from backend.profiles import active_name, load_profile
    from backend.remote import run_sync

    target = load_profile(name)
    current = active_name()
    if current and current != name:
        try:
            run_sync(do_stop(load_profile(current), why=f"c3 profile switch {name}", say=click.echo))
            click.echo(f"stopped {current}")
        except C3Error as error:
            raise type(error)(f"could not stop {current} before switching: {error.message}", hint=error.hint) from None
    p = run_sync(relaunch(target, wait=not no_wait, wait_timeout_s=timeout, say=click.echo))
    click.echo(f"profile {p.name} is active: {p.base_url}")


@profile.command("set")
@click.argument("name")
@click.argument("pairs", nargs=-1, required=True, metavar="KEY=VALUE...")
def set_(name: str, pairs: tuple[str, ...]) -> None:
    """Override recipe parameters in a profile (applied at the next restart; demotes it to recipe + local overrides)."""
    from backend.profiles import load_profile, save_profile
    from backend.recipes import check_overrides, get_recipe, parse_overrides

    p = load_profile(name)
    recipe = get_recipe(p.recipe)
    new = {**p.overrides, **parse_overrides(recipe, list(pairs))}
    check_overrides(recipe, new)
    save_profile(p.model_copy(update={"overrides": new}))
    click.echo(f"{name}: recipe + local overrides ({', '.join(f'{k}={v}' for k, v in new.items())}); `c3 profile restart {name}` applies them")


@profile.command("unset")
@click.argument("name")
@click.argument("keys", nargs=-1, required=True)
def unset(name: str, keys: tuple[str, ...]) -> None:
    """Drop overrides from a profile."""
    from backend.profiles import load_profile, save_profile

    p = load_profile(name)
    new = {k: v for k, v in p.overrides.items() if k not in keys}
    save_profile(p.model_copy(update={"overrides": new}))
    click.echo(f"{name}: overrides now {new or 'none'}")


@profile.command("watchdog-check")
@click.argument("name", required=False)
@click.option("--failures", type=int, default=3, show_default=True)
@click.option("--cooldown", type=float, default=600, show_default=True)
@click.option("--grace", type=float, default=None, help="Start-up grace seconds (default: the recipe's).")
@json_option
def watchdog_check(name: str | None, failures: int, cooldown: float, grace: float | None, as_json: bool) -> None:
    """One watchdog round (what the systemd timer runs)."""
    from backend.cluster.watchdog import check

    result = check(name, failures=failures, cooldown_s=cooldown, grace_s=grace)
    if as_json:
        emit_json({"action": result.action, "profile": result.profile, "detail": result.detail, "failures": result.failures})
    else:
        click.echo(result.line())
