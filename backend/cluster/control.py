"""Act on a launched profile: rebuild its plan, report its status, read its logs, relaunch.

Status, logs and stop (backend.cluster.standdown) act on what is *running*: the containers are found by
the profile's nodes and c3's container name, never by re-rendering the recipe, so an edited profile (a
known-abort override) or an edited or removed recipe cannot lock them. Only a relaunch renders (and
checks) again.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import AsyncIterator
from dataclasses import dataclass

from backend.cluster.containers import Say, quiet, remove_containers
from backend.cluster.hardware import LocalGpus
from backend.cluster.health import probe
from backend.cluster.launch import checked_preflight, launch, pick_gpus
from backend.cluster.plan import LaunchPlan, RankPlan, collect_secrets, render
from backend.cluster.standdown import running_ranks
from backend.errors import C3Error, Refused
from backend.nodes.registry import resolve_nodes
from backend.profiles import Profile
from backend.recipes import get_recipe
from backend.remote.fleet import Fleet
from backend.remote.shell import NodeFailure
from backend.remote.ssh import SshOptions


def plan_for(profile: Profile, *, with_secrets: bool = True) -> LaunchPlan:
    """The plan the profile would launch now (its recipe, nodes and overrides)."""
    recipe = get_recipe(profile.recipe)
    nodes = resolve_nodes(profile.nodes)
    secrets = collect_secrets(recipe) if with_secrets else {}
    return render(recipe, nodes, profile.overrides, profile=profile.name, secrets=secrets, allow_unpinned=True, force=profile.force)


def _health_path(profile: Profile) -> str:
    try:
        return get_recipe(profile.recipe).health_path
    except C3Error:  # the recipe was removed or broken since the launch: engines answer /health
        return "/health"


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


async def relaunch(profile: Profile, *, options: SshOptions | None = None, say: Say = quiet,
                   wait: bool = True, wait_timeout_s: float | None = None, local_gpus: LocalGpus | None = None) -> Profile:
    """Stop the whole group and launch it again (a broken rank does not heal alone). The launch's
    preflight (nodes reachable, Docker answering, the image present) runs before anything is removed:
    a restart that could not start again refuses and leaves the running group as it was. Relaunching a
    profile that is not the active one is a switch: `launch` stops the active one (`stand_down_active`),
    after that preflight, so a profile that could not start leaves the active one serving."""
    plan = plan_for(profile)
    async with Fleet([rp.node for rp in plan.ranks], options) as fleet:
        await checked_preflight(plan, fleet)
        if plan.needs_hardware:  # before anything is removed: a mismatch or a held GPU leaves the group running
            plan = await pick_gpus(plan, fleet, local_gpus)
        await remove_containers(plan, fleet, say)
        return await launch(plan, fleet=fleet, wait=wait, wait_timeout_s=wait_timeout_s, say=say, api_key_env=profile.api_key_env,
                            preflighted=True, local_gpus=local_gpus)

