"""Act on a launched profile: rebuild its plan, stop it, report its status, read its logs, relaunch.

Status, logs and stop act on what is *running*: the containers are found by the profile's nodes and
c3's container name, never by re-rendering the recipe, so an edited profile (a known-abort override)
or an edited or removed recipe cannot lock them. Only a relaunch renders (and checks) again.

One profile is active at a time (the seed's `switch`): launching another recipe first stops the
active one (`stand_down_active`); when that stop fails, the launch is refused with the command to run.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import AsyncIterator
from dataclasses import dataclass

from backend.cluster.hardware import LocalGpus
from backend.cluster.health import probe
from backend.cluster.launch import Say, _quiet, launch, pick_gpus, preflight, remove_containers
from backend.cluster.plan import LaunchPlan, RankPlan, collect_secrets, container_name, env_file_path, render
from backend.errors import C3Error, Refused
from backend.nodes.registry import resolve_nodes
from backend.profiles import Profile, active_name, clear_stopped, is_stopped, load_profile, mark_stopped
from backend.recipes import get_recipe
from backend.remote import Fleet, NodeFailure
from backend.ssh import SshOptions


def plan_for(profile: Profile, *, with_secrets: bool = True) -> LaunchPlan:
    """The plan the profile would launch now (its recipe, nodes and overrides)."""
    recipe = get_recipe(profile.recipe)
    nodes = resolve_nodes(profile.nodes)
    secrets = collect_secrets(recipe) if with_secrets else {}
    return render(recipe, nodes, profile.overrides, profile=profile.name, secrets=secrets, allow_unpinned=True, force=profile.force)


def running_ranks(profile: Profile) -> list[RankPlan]:
    """The profile's containers as launched: its nodes in rank order, c3's container name and env file."""
    name = container_name(profile.name)
    return [RankPlan(rank, node, name, [], env_file_path(node, profile.name)) for rank, node in enumerate(resolve_nodes(profile.nodes))]


def _health_path(profile: Profile) -> str:
    try:
        return get_recipe(profile.recipe).health_path
    except C3Error:  # the recipe was removed or broken since the launch: engines answer /health
        return "/health"


async def stop(profile: Profile, *, options: SshOptions | None = None, why: str = "c3 profile stop", say: Say = _quiet) -> None:
    """Remove the profile's containers on every node and remember the stop (the watchdog leaves it)."""
    mark_stopped(profile.name, why)
    ranks = running_ranks(profile)
    async with Fleet([rp.node for rp in ranks], options) as fleet:
        problems = await remove_containers(ranks, fleet, say)
    if problems:
        node, why_failed = next(iter(problems.items()))
        raise NodeFailure(node, "stop", f"could not stop {profile.name}: {why_failed}",
                          hint="the stop is remembered; run `c3 profile stop` again once the node answers")


def active_to_stand_down(target: str) -> str | None:
    """The active profile a launch of `target` must stop first (None when there is none)."""
    current = active_name()
    if not current or current == target or is_stopped(current):
        return None
    return current


async def stand_down_active(target: str, *, options: SshOptions | None = None, say: Say = _quiet) -> str | None:
    """Stop the active profile before `target` starts (one active profile); returns its name.
    Refuses, with the exact command, when it cannot be stopped."""
    current = active_to_stand_down(target)
    if current is None:
        return None
    say(f"stopping the active profile {current} first (one profile is active at a time)")
    try:
        await stop(load_profile(current), options=options, why=f"switch to {target}", say=say)
    except C3Error as error:
        # Not stopped after all: take back the stop marker, or the next launch would skip it while it runs.
        clear_stopped(current)
        raise Refused(f"the active profile `{current}` could not be stopped before launching `{target}`: {error.message}",
                      hint=f"stop it yourself (`c3 profile stop {current}`), then launch again") from None
    return current


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
    ranks = running_ranks(profile)

    async def one(fleet: Fleet, rp: RankPlan) -> NodeState:
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

    async with Fleet([rp.node for rp in ranks], options) as fleet:
        states = await asyncio.gather(*(one(fleet, rp) for rp in ranks))
    ok, detail = await asyncio.to_thread(probe, profile.base_url, _health_path(profile), 3.0)
    return ProfileStatus(profile, list(states), ok, detail)


async def logs(profile: Profile, *, node: str | None = None, tail: int = 100, follow: bool = False,
               options: SshOptions | None = None) -> AsyncIterator[str]:
    """Lines of one rank's container log (rank 0 unless `node` is named)."""
    ranks = running_ranks(profile)
    chosen = ranks[0]
    if node is not None:
        matches = [rp for rp in ranks if rp.node.name == node]
        if not matches:
            raise Refused(f"profile `{profile.name}` does not run on node `{node}`", hint="nodes: " + ", ".join(profile.nodes))
        chosen = matches[0]
    cmd = f"docker logs --tail {int(tail)}{' -f' if follow else ''} {shlex.quote(chosen.container)} 2>&1"
    async with Fleet([chosen.node], options) as fleet:
        shell = await fleet.shell(chosen.node)
        async for line in shell.stream(cmd):
            yield line


async def relaunch(profile: Profile, *, options: SshOptions | None = None, say: Say = _quiet,
                   wait: bool = True, wait_timeout_s: float | None = None, local_gpus: LocalGpus | None = None) -> Profile:
    """Stop the whole group and launch it again (a broken rank does not heal alone). The launch's
    preflight (nodes reachable, Docker answering, the image present) runs before anything is removed:
    a restart that could not start again refuses and leaves the running group as it was. Relaunching a
    profile that is not the active one is a switch: `launch` stops the active one (`stand_down_active`),
    after that preflight, so a profile that could not start leaves the active one serving."""
    plan = plan_for(profile)
    async with Fleet([rp.node for rp in plan.ranks], options) as fleet:
        await preflight(plan, fleet)
        if plan.needs_hardware:  # before anything is removed: a mismatch or a held GPU leaves the group running
            plan = await pick_gpus(plan, fleet, local_gpus)
        await remove_containers(plan, fleet, say)
        return await launch(plan, fleet=fleet, wait=wait, wait_timeout_s=wait_timeout_s, say=say, api_key_env=profile.api_key_env,
                            preflighted=True, local_gpus=local_gpus)

