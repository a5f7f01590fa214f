"""The stand-down of a launched profile: its containers as launched, stopping them, and the rule of one
active profile (the seed's `switch`): launching another recipe first stops the active one
(`stand_down_active`); when that stop fails, the launch is refused with the command to run.

Below both the launch (backend.cluster.launch), which stands the active profile down, and the relaunch
(backend.cluster.control); the profile actions stop through it.
"""

from __future__ import annotations

from backend.cluster.containers import Say, quiet, remove_containers
from backend.cluster.plan import RankPlan, container_name, env_file_path
from backend.errors import C3Error, Refused
from backend.nodes.registry import resolve_nodes
from backend.profiles import Profile, active_name, clear_stopped, is_stopped, load_profile, mark_stopped
from backend.remote.fleet import Fleet
from backend.remote.shell import NodeFailure
from backend.remote.ssh import SshOptions


def running_ranks(profile: Profile) -> list[RankPlan]:
    """The profile's containers as launched: its nodes in rank order, c3's container name and env file."""
    name = container_name(profile.name)
    return [RankPlan(rank, node, name, [], env_file_path(node, profile.name)) for rank, node in enumerate(resolve_nodes(profile.nodes))]


async def stop(profile: Profile, *, options: SshOptions | None = None, why: str = "c3 profile stop", say: Say = quiet) -> None:
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


async def stand_down_active(target: str, *, options: SshOptions | None = None, say: Say = quiet) -> str | None:
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
