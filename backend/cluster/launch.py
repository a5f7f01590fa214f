"""Launch a recipe across its nodes, all or nothing.

Order: refuse bad overrides/node counts/unpinned images (nothing touched) → check every node
concurrently (reachable, Docker answers, the image is there) → resolve the ranks' addresses → pick
each rank's GPUs (unless the caller already did: backend.cluster.hardware; a mismatch or a held GPU
refuses here) → stop
the active profile if it is another one (one active profile) → start rank by rank (stale container
removed, secrets uploaded to a 0600 env file, `docker run`) → wait for rank 0 to answer. Any
failure after the first container starts rolls back every node already touched, and the error names
the node and the cause.
"""

from __future__ import annotations

import asyncio
import shlex
import time
from collections.abc import Callable

from backend.cluster import addresses, hardware
from backend.cluster.health import probe
from backend.cluster.plan import LaunchPlan, RankPlan, image_inspect, shell_join
from backend.nodes.registry import Node
from backend.profiles import Profile, clear_stopped, now_iso, save_profile, set_active
from backend.remote import Fleet, NodeFailure, shell_path
from backend.ssh import SshOptions

Say = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def _limit(fleet: Fleet, default: float) -> float:
    """A command's time limit: the default, or less when the caller's SshOptions ask for less."""
    return min(default, fleet.options.command_timeout) if fleet.options else default


async def preflight(plan: LaunchPlan, fleet: Fleet) -> None:
    """Every node reachable, Docker answering and the image present; raises the first NodeFailure."""
    image = plan.image

    async def check(rp: RankPlan) -> None:
        shell = await fleet.shell(rp.node)
        version = await shell.run("docker version --format '{{.Server.Version}}'", timeout=_limit(fleet, 30))
        if not version.ok:
            raise NodeFailure(rp.node.name, "docker", f"docker does not answer: {version.last_line()}")
        found = await shell.run(image_inspect(image), timeout=_limit(fleet, 30))
        if not found.ok:
            ship = f"docker save {image} | ssh {rp.node.ssh} docker load"
            raise NodeFailure(rp.node.name, "image", f"image `{image}` is not on the node", hint=f"ship it: {ship}")

    results = await asyncio.gather(*(check(rp) for rp in plan.ranks), return_exceptions=True)
    for result in results:
        if isinstance(result, NodeFailure):
            raise result
        if isinstance(result, BaseException):
            raise result


async def resolve_addresses(plan: LaunchPlan, fleet: Fleet) -> addresses.GroupAddresses:
    """Ask the nodes for the ranks' addresses (backend.cluster.addresses, shared with shard)."""
    async def run(node: Node, script: str) -> str:
        shell = await fleet.shell(node)
        return (await shell.run(script, timeout=_limit(fleet, 30))).stdout

    return await addresses.resolve(plan.nodes, run)


def free_profiles(profile: str, active: str | None) -> set[str]:
    """Profiles whose containers do not hold GPUs for this launch: its own (replaced) and the active
    one it stands down first."""
    return {profile} | ({active} if active else set())


async def pick_gpus(plan: LaunchPlan, fleet: Fleet, local_gpus: hardware.LocalGpus | None = None) -> LaunchPlan:
    """The plan with each rank's GPUs picked from what its node says now (backend.cluster.hardware):
    Refused on a mismatch (unless the plan is forced) or a held GPU; NodeFailure when a node cannot say."""
    from backend.cluster.control import active_to_stand_down

    keep = free_profiles(plan.profile, active_to_stand_down(plan.profile))
    plan = plan.with_hardware(await hardware.probe(plan.nodes, fleet, keep, local_gpus=local_gpus))
    unknown = next((f for f in (plan.hardware or {}).values() if not f.reachable), None)
    if unknown is not None:
        raise NodeFailure(unknown.node, "gpus", f"cannot read the node's GPUs: {unknown.error}")
    return plan


async def remove_containers(plan_or_ranks: LaunchPlan | list[RankPlan], fleet: Fleet, say: Say = _quiet) -> dict[str, str]:
    """`docker rm -f` the profile's container (and its env file) on each node; errors per node, never raised."""
    ranks = plan_or_ranks.ranks if isinstance(plan_or_ranks, LaunchPlan) else plan_or_ranks
    problems: dict[str, str] = {}

    async def one(rp: RankPlan) -> None:
        try:
            shell = await fleet.shell(rp.node)
            env_rm = f" ; rm -f {shell_path(rp.env_file)}" if rp.env_file else ""
            result = await shell.run(f"docker rm -f {shlex.quote(rp.container)} >/dev/null 2>&1{env_rm}; "
                                     f"! docker container inspect {shlex.quote(rp.container)} >/dev/null 2>&1", timeout=_limit(fleet, 60))
            if not result.ok:
                problems[rp.node.name] = result.last_line()
            else:
                say(f"{rp.node.name}: removed {rp.container}")
        except NodeFailure as failure:
            problems[rp.node.name] = failure.detail

    await asyncio.gather(*(one(rp) for rp in ranks))
    return problems


async def start_rank(plan: LaunchPlan, rp: RankPlan, fleet: Fleet) -> None:
    shell = await fleet.shell(rp.node)
    await shell.run(f"docker rm -f {shlex.quote(rp.container)} >/dev/null 2>&1 || true", timeout=_limit(fleet, 60))
    if rp.env_file:
        await shell.put_file(plan.env_file_text(), rp.env_file, mode=0o600)
    result = await shell.run(shell_join(rp.run_argv), timeout=_limit(fleet, 120))
    if not result.ok:
        raise NodeFailure(rp.node.name, "docker", f"docker run failed: {result.last_line()}")


async def container_running(rp: RankPlan, fleet: Fleet) -> tuple[bool, str]:
    shell = await fleet.shell(rp.node)
    result = await shell.run(f"docker inspect --format '{{{{.State.Status}}}} {{{{.State.ExitCode}}}}' {shlex.quote(rp.container)}", timeout=30)
    if not result.ok:
        return False, "container is gone"
    status = result.stdout.strip()
    return status.startswith("running"), status


async def wait_ready(plan: LaunchPlan, fleet: Fleet, timeout_s: float, say: Say = _quiet) -> None:
    """Poll rank 0's health until it answers; fail early when a rank's container exits."""
    deadline = time.monotonic() + timeout_s
    last_check = 0.0
    while time.monotonic() < deadline:
        ok, detail = await asyncio.to_thread(probe, plan.base_url, plan.recipe.health_path, 3.0)
        if ok:
            say(f"rank 0 answers: {detail}")
            return
        if time.monotonic() - last_check > 2.0:
            last_check = time.monotonic()
            for rp in plan.ranks:
                running, status = await container_running(rp, fleet)
                if not running:
                    shell = await fleet.shell(rp.node)
                    logs = await shell.run(f"docker logs --tail 5 {shlex.quote(rp.container)} 2>&1", timeout=30)
                    tail = logs.last_line() if logs.stdout.strip() else status
                    raise NodeFailure(rp.node.name, "engine", f"rank {rp.rank} container exited ({status}): {tail}")
        await asyncio.sleep(0.5)
    raise NodeFailure(plan.ranks[0].node.name, "timeout", f"rank 0 did not answer {plan.base_url} within {timeout_s:.0f}s")


async def launch(
    plan: LaunchPlan,
    *,
    options: SshOptions | None = None,
    fleet: Fleet | None = None,
    wait: bool = True,
    wait_timeout_s: float | None = None,
    say: Say = _quiet,
    api_key_env: str | None = None,
    preflighted: bool = False,
    local_gpus: hardware.LocalGpus | None = None,
) -> Profile:
    """Run the plan; on success write the profile, make it active and clear any deliberate stop.
    `preflighted`: the caller ran `preflight` on this fleet just before (a relaunch does, before it
    removes anything), so it is not asked of every node a second time. `local_gpus`: see `hardware.probe`."""
    # The profile is built (and so validated) before anything happens: a value it refuses must never
    # surface after the old profile was stopped and the containers started.
    profile = Profile(
        name=plan.profile, recipe=plan.recipe.id, recipe_digest=plan.recipe.digest(),
        nodes=[rp.node.name for rp in plan.ranks], overrides=plan.overrides, base_url=plan.base_url,
        model=plan.recipe.model_name, api_key_env=api_key_env if api_key_env is not None else plan.recipe.api_key_env,
        force=plan.force,
    )
    own = fleet is None
    fleet = fleet or Fleet([rp.node for rp in plan.ranks], options)
    touched: list[RankPlan] = []
    try:
        if not preflighted:
            await preflight(plan, fleet)
        say("preflight ok on " + ", ".join(rp.node.name for rp in plan.ranks))
        if plan.needs_addresses:
            plan = plan.with_addresses(await resolve_addresses(plan, fleet))
            assert plan.addresses is not None
            say(f"head address {plan.addresses.head_address}; " + ", ".join(
                f"{r.node} {r.address} ({r.interface})" for r in plan.addresses.ranks.values()))
        from backend.cluster.control import stand_down_active

        if plan.needs_hardware:
            # The ranks' GPUs are picked from what the nodes say now; a mismatch or a held GPU
            # refuses here, before the active profile is stopped or anything starts.
            plan = await pick_gpus(plan, fleet, local_gpus)
        # One active profile: the new one checked out, the old one stops before anything starts.
        await stand_down_active(plan.profile, options=options, say=say)
        try:
            for rp in plan.ranks:
                touched.append(rp)
                await start_rank(plan, rp, fleet)
                say(f"{rp.node.name}: rank {rp.rank} started ({rp.container})")
            if wait:
                await wait_ready(plan, fleet, wait_timeout_s or float(plan.recipe.startup_grace_s), say)
        except NodeFailure as failure:
            rolled = await remove_containers(touched, fleet, say)
            done = [rp.node.name for rp in touched if rp.node.name not in rolled]
            left = [f"{n} ({why})" for n, why in rolled.items()]
            note = f"rolled back {', '.join(done) or 'nothing'}"
            if left:
                note += f"; could not clean {', '.join(left)}"
            raise NodeFailure(failure.node, failure.kind, f"{failure.detail} — launch stopped, {note}", hint=failure.hint) from None
    finally:
        if own:
            await fleet.close()
    profile = profile.model_copy(update={"launched_at": now_iso()})
    save_profile(profile)
    set_active(profile.name)
    clear_stopped(profile.name)
    return profile

