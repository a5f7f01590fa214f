"""Act on a launched profile: rebuild its plan, stop it, report its status, read its logs, relaunch."""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import AsyncIterator
from dataclasses import dataclass

from backend.cluster.health import probe
from backend.cluster.launch import Say, _quiet, launch, remove_containers
from backend.cluster.plan import LaunchPlan, collect_secrets, render
from backend.errors import Refused
from backend.nodes.registry import resolve_nodes
from backend.profiles import Profile, mark_stopped
from backend.recipes import get_recipe
from backend.ssh import Fleet, NodeFailure, SshOptions


def plan_for(profile: Profile, *, with_secrets: bool = True) -> LaunchPlan:
    """The plan the profile would launch now (its recipe, nodes and overrides)."""
    recipe = get_recipe(profile.recipe)
    nodes = resolve_nodes(profile.nodes)
    secrets = collect_secrets(recipe) if with_secrets else {}
    return render(recipe, nodes, profile.overrides, profile=profile.name, secrets=secrets, allow_unpinned=True)


async def stop(profile: Profile, *, options: SshOptions | None = None, why: str = "c3 profile stop", say: Say = _quiet) -> None:
    """Remove the profile's containers on every node and remember the stop (the watchdog leaves it)."""
    mark_stopped(profile.name, why)
    plan = plan_for(profile, with_secrets=False)
    for rp in plan.ranks:  # the env file may exist from launch even though this plan holds no secrets
        rp.env_file = rp.env_file or _env_guess(plan, rp)
    async with Fleet([rp.node for rp in plan.ranks], options) as fleet:
        problems = await remove_containers(plan, fleet, say)
    if problems:
        node, why_failed = next(iter(problems.items()))
        raise NodeFailure(node, "stop", f"could not stop {profile.name}: {why_failed}",
                          hint="the stop is remembered; run `c3 profile stop` again once the node answers")


def _env_guess(plan: LaunchPlan, rp) -> str:
    from backend.cluster.plan import env_file_path

    return env_file_path(rp.node, plan.profile)


@dataclass
class NodeState:
    """One rank's container as its node reports it."""

    node: str
    rank: int
    state: str
    """`running`, `exited 1`, `absent`, or the node's error."""
    started_at: str | None = None


@dataclass
class ProfileStatus:
    profile: Profile
    nodes: list[NodeState]
    endpoint_ok: bool
    endpoint_detail: str


async def status(profile: Profile, *, options: SshOptions | None = None) -> ProfileStatus:
    plan = plan_for(profile, with_secrets=False)

    async def one(fleet: Fleet, rp) -> NodeState:
        try:
            shell = await fleet.shell(rp.node)
            res = await shell.run(
                f"docker inspect --format '{{{{.State.Status}}}} {{{{.State.ExitCode}}}} {{{{.State.StartedAt}}}}' {shlex.quote(rp.container)}",
                timeout=30,
            )
        except NodeFailure as failure:
            return NodeState(rp.node.name, rp.rank, f"error: {failure.detail}")
        if not res.ok:
            return NodeState(rp.node.name, rp.rank, "absent")
        state, code, started = (res.stdout.split() + ["", "", ""])[:3]
        return NodeState(rp.node.name, rp.rank, state if state == "running" else f"{state} {code}", started or None)

    async with Fleet([rp.node for rp in plan.ranks], options) as fleet:
        states = await asyncio.gather(*(one(fleet, rp) for rp in plan.ranks))
    ok, detail = await asyncio.to_thread(probe, profile.base_url, plan.recipe.health_path, 3.0)
    return ProfileStatus(profile, list(states), ok, detail)


async def logs(profile: Profile, *, node: str | None = None, tail: int = 100, follow: bool = False,
               options: SshOptions | None = None) -> AsyncIterator[str]:
    """Lines of one rank's container log (rank 0 unless `node` is named)."""
    plan = plan_for(profile, with_secrets=False)
    chosen = plan.ranks[0]
    if node is not None:
        matches = [rp for rp in plan.ranks if rp.node.name == node]
        if not matches:
            raise Refused(f"profile `{profile.name}` does not run on node `{node}`", hint="nodes: " + ", ".join(profile.nodes))
        chosen = matches[0]
    cmd = f"docker logs --tail {int(tail)}{' -f' if follow else ''} {shlex.quote(chosen.container)} 2>&1"
    async with Fleet([chosen.node], options) as fleet:
        shell = await fleet.shell(chosen.node)
        async for line in shell.stream(cmd):
            yield line


async def relaunch(profile: Profile, *, options: SshOptions | None = None, say: Say = _quiet,
                   wait: bool = True, wait_timeout_s: float | None = None) -> Profile:
    """Stop the whole group and launch it again (a broken rank does not heal alone)."""
    plan = plan_for(profile)
    async with Fleet([rp.node for rp in plan.ranks], options) as fleet:
        await remove_containers(plan, fleet, say)
        return await launch(plan, fleet=fleet, wait=wait, wait_timeout_s=wait_timeout_s, say=say, api_key_env=profile.api_key_env)
