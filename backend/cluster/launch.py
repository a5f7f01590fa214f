"""Launch a recipe across its nodes, all or nothing.

Order: refuse bad overrides/node counts/unpinned images (nothing touched) → check every node
concurrently (reachable, Docker answers, the image is there) → resolve the ranks' addresses → pick
each rank's GPUs (unless the caller already did: backend.cluster.hardware; a mismatch or a held GPU
refuses here) → stop
the active profile if it is another one (one active profile) → start rank by rank (stale container
removed, secrets uploaded to a 0600 env file, `docker run`) → wait for rank 0 to answer. Any
failure after the first container starts rolls back every node already touched, and the error names
the node and the cause.

Named phases (DESIGN.md): reach (SSH), docker (the daemon answers), image (present, the same image id
on every node), addresses, gpus, start (each rank's `docker run`), load (until rank 0 answers, within
the recipe's startup grace or --timeout), first_token (one `max_tokens: 1` completion through rank 0 returns a
token: an answering health route does not prove the ranks behind it can serve). A failure is `phase <name> failed on node <node>: <reason>`,
with the last lines of that rank's container log when it died.
"""

from __future__ import annotations

import asyncio
import shlex
import time

from backend.cluster import addresses, hardware
from backend.cluster.containers import Say, command_limit, container_running, preflight, quiet, remove_containers, start_rank
from backend.cluster.health import probe
from backend.cluster.plan import LaunchPlan, RankPlan
from backend.cluster.standdown import active_to_stand_down, stand_down_active
from backend.errors import PhaseFailure
from backend.profiles import Profile, clear_stopped, now_iso, save_profile, set_active
from backend.remote.fleet import Fleet
from backend.remote.node import Node
from backend.remote.shell import NodeFailure
from backend.remote.ssh import SshOptions


async def resolve_addresses(plan: LaunchPlan, fleet: Fleet) -> addresses.GroupAddresses:
    """Ask the nodes for the ranks' addresses (backend.cluster.addresses, shared with shard)."""
    async def run(node: Node, script: str) -> str:
        shell = await fleet.shell(node)
        return (await shell.run(script, timeout=command_limit(fleet, 30))).stdout

    return await addresses.resolve(plan.nodes, run)


def free_profiles(profile: str, active: str | None) -> set[str]:
    """Profiles whose containers do not hold GPUs for this launch: its own (replaced) and the active
    one it stands down first."""
    return {profile} | ({active} if active else set())


async def pick_gpus(plan: LaunchPlan, fleet: Fleet, local_gpus: hardware.LocalGpus | None = None) -> LaunchPlan:
    """The plan with each rank's GPUs picked from what its node says now (backend.cluster.hardware):
    Refused on a mismatch (unless the plan is forced) or a held GPU; NodeFailure when a node cannot say."""
    keep = free_profiles(plan.profile, active_to_stand_down(plan.profile))
    plan = plan.with_hardware(await hardware.probe(plan.nodes, fleet, keep, local_gpus=local_gpus))
    unknown = next((f for f in (plan.hardware or {}).values() if not f.reachable), None)
    if unknown is not None:
        raise NodeFailure(unknown.node, "gpus", f"cannot read the node's GPUs: {unknown.error}")
    return plan


async def log_tail(rp: RankPlan, fleet: Fleet) -> tuple[str, ...]:
    """The last `TAIL_LINES` non-blank lines of a rank's container log, for a phase failure."""
    shell = await fleet.shell(rp.node)
    logs = await shell.run(f"docker logs --tail {TAIL_LINES} {shlex.quote(rp.container)} 2>&1", timeout=30)
    return tuple(line for line in logs.stdout.splitlines() if line.strip())


async def wait_ready(plan: LaunchPlan, fleet: Fleet, timeout_s: float, say: Say = quiet) -> None:
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
                    lines = await log_tail(rp, fleet)
                    raise PhaseFailure("load", rp.node.name, f"rank {rp.rank} container exited ({status}): {lines[-1] if lines else status}",
                                       tail=lines)
        await asyncio.sleep(0.5)
    head = plan.ranks[0]
    raise PhaseFailure("load", head.node.name, f"rank 0 did not answer {plan.base_url} within {timeout_s:.0f}s",
                       tail=await log_tail(head, fleet),
                       hint="raise --timeout if it is still loading, or read its log: `c3 profile logs`")


TAIL_LINES = 8
"""How many of a container's last log lines a phase failure shows."""
FIRST_TOKEN_S = 120.0
"""Deadline of phase first_token: the engine already answers its health route, so one token is quick once it can
serve; what is still loading answers 503 meanwhile and is asked again."""


async def wait_first_token(plan: LaunchPlan, fleet: Fleet, deadline_s: float, say: Say = quiet) -> None:
    """Phase first_token: one `max_tokens: 1` completion through rank 0 until a token comes back (asked again while
    the engine says it is still loading); an error answer or the deadline fails the phase with rank 0's log tail."""
    from backend import first_token
    from backend.errors import terminal_safe

    key = plan.secrets.get("VLLM_API_KEY")  # the recipe's key, as collect_secrets hands it to the engine
    model = plan.recipe.model_name
    started = time.monotonic()
    last = f"gave no token within {deadline_s:.0f}s"
    while (left := deadline_s - (time.monotonic() - started)) > 0:
        try:
            answer = await asyncio.wait_for(first_token.ask(plan.base_url, model, api_key=key), timeout=left)
        except TimeoutError:
            last = f"gave no token within {deadline_s:.0f}s"
            break
        if answer.token is not None:
            say(f"first token '{terminal_safe(answer.token, one_line=True)}' from {terminal_safe(model, one_line=True)} "
                f"after {time.monotonic() - started:.1f}s")
            return
        last = answer.problem
        if not answer.again:
            break
        await asyncio.sleep(0.5)
    else:
        last = f"gave no token within {deadline_s:.0f}s (last: {last})"
    head = plan.ranks[0]
    raise PhaseFailure("first_token", head.node.name, f"{plan.base_url}/completions {last}",
                       tail=await log_tail(head, fleet),
                       hint="the engine answers its health route but not a completion: read its log (`c3 profile logs`)")

_PREFLIGHT_PHASES = {"docker": "docker", "image": "image"}
"""Preflight failures by kind; every other kind (unreachable, auth, host key, timeout, ssh) is reach."""


def _phased(failure: NodeFailure | PhaseFailure, phase: str, note: str = "") -> PhaseFailure:
    """`failure` as a failure of `phase` (a PhaseFailure keeps its own), with `note` after the reason."""
    if isinstance(failure, PhaseFailure):
        phase, node, reason, tail, code = failure.phase, failure.node, failure.reason, failure.tail, failure.exit_code
    else:
        node, reason, tail, code = failure.node, failure.detail, (), failure.exit_code
    return PhaseFailure(phase, node, reason + note, hint=failure.hint, tail=tail, exit_code=code)


async def checked_preflight(plan: LaunchPlan, fleet: Fleet) -> None:
    """The preflight (backend.cluster.containers) as the phases reach, docker and image."""
    try:
        await preflight(plan, fleet)
    except NodeFailure as failure:
        raise _phased(failure, _PREFLIGHT_PHASES.get(failure.kind, "reach")) from None


async def launch(
    plan: LaunchPlan,
    *,
    options: SshOptions | None = None,
    fleet: Fleet | None = None,
    wait: bool = True,
    wait_timeout_s: float | None = None,
    say: Say = quiet,
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
    phase = "reach"
    try:
        if not preflighted:
            await checked_preflight(plan, fleet)
        say("preflight ok on " + ", ".join(rp.node.name for rp in plan.ranks))
        if plan.needs_addresses:
            phase = "addresses"
            plan = plan.with_addresses(await resolve_addresses(plan, fleet))
            assert plan.addresses is not None
            say(f"head address {plan.addresses.head_address}; " + ", ".join(
                f"{r.node} {r.address} ({r.interface})" for r in plan.addresses.ranks.values()))
        if plan.needs_hardware:
            # The ranks' GPUs are picked from what the nodes say now; a mismatch or a held GPU
            # refuses here, before the active profile is stopped or anything starts.
            phase = "gpus"
            plan = await pick_gpus(plan, fleet, local_gpus)
        # One active profile: the new one checked out, the old one stops before anything starts.
        phase = "stand-down"
        await stand_down_active(plan.profile, options=options, say=say)
        try:
            phase = "start"
            for rp in plan.ranks:
                touched.append(rp)
                await start_rank(plan, rp, fleet)
                say(f"{rp.node.name}: rank {rp.rank} started ({rp.container})")
            if wait:
                phase = "load"
                await wait_ready(plan, fleet, wait_timeout_s or float(plan.recipe.startup_grace_s), say)
                phase = "first_token"
                await wait_first_token(plan, fleet, FIRST_TOKEN_S, say)
        except (NodeFailure, PhaseFailure) as failure:
            rolled = await remove_containers(touched, fleet, say)
            done = [rp.node.name for rp in touched if rp.node.name not in rolled]
            left = [f"{n} ({why})" for n, why in rolled.items()]
            note = f"rolled back {', '.join(done) or 'nothing'}"
            if left:
                note += f"; could not clean {', '.join(left)}"
            raise _phased(failure, phase, f" — launch stopped, {note}") from None
    except NodeFailure as failure:
        # Nothing was started yet: the preflight's kind says which check failed.
        raise _phased(failure, _PREFLIGHT_PHASES.get(failure.kind, "reach") if phase == "reach" else phase) from None
    finally:
        if own:
            await fleet.close()
    profile = profile.model_copy(update={"launched_at": now_iso()})
    save_profile(profile)
    set_active(profile.name)
    clear_stopped(profile.name)
    return profile

