"""The containers of a launch plan on its nodes: the preflight (Docker answering, the image present),
starting one rank's container, asking whether it runs, and removing them (with their env files).

Shared by the launch (backend.cluster.launch), the stand-down of the active profile
(backend.cluster.standdown) and the profile commands (backend.cluster.control), so none of them
imports another for these.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Callable

from backend.cluster.plan import LaunchPlan, RankPlan, image_inspect, shell_join
from backend.remote.fleet import Fleet
from backend.remote.shell import NodeFailure, shell_path

Say = Callable[[str], None]


def quiet(_: str) -> None:
    return None


def command_limit(fleet: Fleet, default: float) -> float:
    """A command's time limit: the default, or less when the caller's SshOptions ask for less."""
    return min(default, fleet.options.command_timeout) if fleet.options else default


async def preflight(plan: LaunchPlan, fleet: Fleet) -> None:
    """Every node reachable, Docker answering and the image present, with the same image id on every
    node (the same digest); raises the first NodeFailure."""
    image = plan.image

    async def check(rp: RankPlan) -> str:
        shell = await fleet.shell(rp.node)
        version = await shell.run("docker version --format '{{.Server.Version}}'", timeout=command_limit(fleet, 30))
        if not version.ok:
            raise NodeFailure(rp.node.name, "docker", f"docker does not answer: {version.last_line()}")
        found = await shell.run(image_inspect(image), timeout=command_limit(fleet, 30))
        if not found.ok:
            ship = f"docker save {image} | ssh {rp.node.ssh} docker load"
            raise NodeFailure(rp.node.name, "image", f"image `{image}` is not on the node", hint=f"ship it: {ship}")
        return found.stdout.strip()

    results = await asyncio.gather(*(check(rp) for rp in plan.ranks), return_exceptions=True)
    ids: dict[str, str] = {}
    for rp, result in zip(plan.ranks, results, strict=True):
        if isinstance(result, BaseException):
            raise result
        ids[rp.node.name] = result
    first = plan.ranks[0].node.name
    for rp in plan.ranks[1:]:
        if ids[rp.node.name] != ids[first]:
            raise NodeFailure(rp.node.name, "image", f"image `{image}` is {ids[rp.node.name][:19]} on {rp.node.name} but {ids[first][:19]} on {first}",
                              hint=f"ship the same image everywhere: docker save {image} | ssh {rp.node.ssh} docker load")


async def remove_containers(plan_or_ranks: LaunchPlan | list[RankPlan], fleet: Fleet, say: Say = quiet) -> dict[str, str]:
    """`docker rm -f` the profile's container (and its env file) on each node; errors per node, never raised."""
    ranks = plan_or_ranks.ranks if isinstance(plan_or_ranks, LaunchPlan) else plan_or_ranks
    problems: dict[str, str] = {}

    async def one(rp: RankPlan) -> None:
        try:
            shell = await fleet.shell(rp.node)
            env_rm = f" ; rm -f {shell_path(rp.env_file)}" if rp.env_file else ""
            result = await shell.run(f"docker rm -f {shlex.quote(rp.container)} >/dev/null 2>&1{env_rm}; "
                                     f"! docker container inspect {shlex.quote(rp.container)} >/dev/null 2>&1", timeout=command_limit(fleet, 60))
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
    await shell.run(f"docker rm -f {shlex.quote(rp.container)} >/dev/null 2>&1 || true", timeout=command_limit(fleet, 60))
    if rp.env_file:
        await shell.put_file(plan.env_file_text(), rp.env_file, mode=0o600)
    result = await shell.run(shell_join(rp.run_argv), timeout=command_limit(fleet, 120))
    if not result.ok:
        raise NodeFailure(rp.node.name, "docker", f"docker run failed: {result.last_line()}")


async def container_running(rp: RankPlan, fleet: Fleet) -> tuple[bool, str]:
    shell = await fleet.shell(rp.node)
    result = await shell.run(f"docker inspect --format '{{{{.State.Status}}}} {{{{.State.ExitCode}}}}' {shlex.quote(rp.container)}", timeout=30)
    if not result.ok:
        return False, "container is gone"
    status = result.stdout.strip()
    return status.startswith("running"), status
