"""The Nodes and Recipes modes over the real backend (used by `services_real`): node health, running
pools, the active profile, and the node/recipe writes (plan → re-check → execute).

Everything here blocks (SSH, HTTP, files); the app calls it from thread workers. The asyncio parts
of the backend (`probe_nodes`, `launch`, `stop`) run in a fresh event loop of the worker's own thread.
Secrets never reach a `WritePlan`: a launch's preview is `LaunchPlan.describe()` (secrets by name),
and the plan is rendered again, with the secrets, only inside `execute`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from backend.errors import C3Error, Refused
from c3.services import (
    BootProgress,
    NewNode,
    NodeGpuRow,
    NodeRow,
    PoolBackendRow,
    PoolRow,
    ProfileRow,
    ProgressCallback,
    RecipeLaunch,
    WriteKind,
    WritePlan,
    WriteResult,
)

CLUSTER_KINDS = frozenset({"node_add", "node_rm", "recipe_launch", "recipe_stop"})


def _message(error: C3Error) -> str:
    return error.message + (f" — hint: {error.hint}" if error.hint else "")


# -- reads -------------------------------------------------------------------------------------------
def node_rows(svc: Any) -> list[NodeRow]:
    """The registry with live reachability, endpoint health and GPUs (all nodes concurrently)."""
    from backend.nodes.health import probe_nodes
    from backend.nodes.registry import load_registry

    nodes = list(load_registry().nodes)
    if not nodes:
        return []
    health = asyncio.run(probe_nodes(nodes))
    rig_gpus = _demo_rig_gpus(svc) if getattr(svc, "demo", False) else None
    rows = []
    for node, h in zip(nodes, health, strict=True):
        gpus = tuple(NodeGpuRow(g.index, g.name, g.total_mib, g.used_mib) for g in h.gpus)
        gpu_error = h.gpu_error
        if rig_gpus is not None and node.local:
            # The demo's pods run on the simulated rig, so that is this machine's GPUs in the demo.
            gpus, gpu_error = rig_gpus, None
        where = "this machine, no SSH" if node.local else f"ssh {h.ssh_kind or 'ok'}"
        detail = h.ssh_error or where
        rows.append(NodeRow(node.name, node.host, node.ssh, node.local, h.reachable, detail, h.endpoint_ok, h.endpoint_detail, gpus, gpu_error, node.ssh_key))
    return rows


def _demo_rig_gpus(svc: Any) -> tuple[NodeGpuRow, ...] | None:
    try:
        return tuple(NodeGpuRow(s.gpu.index, s.gpu.name, s.gpu.total_mib, s.used_mib) for s in svc.gpu_snapshots())
    except C3Error:
        return None


def pool_rows() -> list[PoolRow]:
    """Every running router (`c3 pool serve`) with its live per-backend numbers."""
    from backend.pool.status import read_pools

    rows = []
    for pool in read_pools(timeout_s=1.0):
        backends = tuple(
            PoolBackendRow(
                b.node, b.url, b.state, b.healthy, b.draining, b.suspect, b.in_flight, b.requests, b.errors,
                b.latency_ms.get("p50"), b.latency_ms.get("p99"), b.last_error,
            )
            for b in pool.backends
        )
        rows.append(PoolRow(pool.bind, pool.sticky, pool.pid, pool.reachable, pool.error, pool.pins, pool.sticky_hit_ratio, pool.uptime_s, backends))
    return rows


def active_profile_row() -> ProfileRow | None:
    from backend.profiles import active_name, is_stopped, load_profile

    name = active_name()
    if not name:
        return None
    try:
        profile = load_profile(name)
    except C3Error:
        return None
    return ProfileRow(profile.name, profile.recipe, tuple(profile.nodes), profile.base_url, is_stopped(profile.name))


def override_problems(recipe_id: str, overrides: tuple[str, ...]) -> list[str]:
    """The modal's as-typed check of `--set` entries: the backend's own parser and known-abort rules,
    entry by entry so that each bad one gets its own line."""
    from backend.recipes import check_overrides, get_recipe, parse_overrides

    try:
        recipe = get_recipe(recipe_id)
    except C3Error as error:
        return [_message(error)]
    problems = []
    for pair in overrides:
        try:
            check_overrides(recipe, parse_overrides(recipe, [pair]))
        except C3Error as error:
            problems.append(_message(error))
    return problems


# -- plans -------------------------------------------------------------------------------------------
def cluster_problems(kind: WriteKind, pod: str | None, request: Any) -> list[str]:
    """Why the write cannot run now (empty: go). Called for the plan and again just before executing."""
    if kind == "node_add" and isinstance(request, NewNode):
        return _node_add_problems(request)
    if kind == "node_rm":
        from backend.nodes.registry import load_registry

        if not any(n.name == pod for n in load_registry().nodes):
            return [f"node `{pod}` is not registered"]
        return []
    if kind == "recipe_launch" and isinstance(request, RecipeLaunch):
        try:
            _render(request, with_secrets=False)
        except C3Error as error:
            return [_message(error)]
        return []
    if kind == "recipe_stop":
        from backend.profiles import load_profile

        try:
            load_profile(pod or "")
        except C3Error as error:
            return [_message(error)]
        return []
    return [f"unknown write {kind}"]


def _node_add_problems(request: NewNode) -> list[str]:
    import re

    from backend.nodes.registry import (
        NODE_NAME_PATTERN,
        _validate_ssh,
        _validate_url,
        load_registry,
    )

    problems = []
    if not re.fullmatch(NODE_NAME_PATTERN, request.name) or len(request.name) > 63:
        problems.append(f"node name `{request.name}` must match [a-z0-9][a-z0-9_-]*")
    for check, value in ((_validate_url, request.host), (_validate_ssh, request.ssh)):
        try:
            check(value)
        except C3Error as error:
            problems.append(_message(error).replace("--host", "host").replace("--ssh", "ssh"))
    if any(n.name.lower() == request.name.lower() for n in load_registry().nodes):
        problems.append(f"node `{request.name}` is already registered")
    if request.ssh_key and not Path(request.ssh_key).expanduser().is_file():
        problems.append(f"ssh key {request.ssh_key} is not a file")
    return problems


def _render(request: RecipeLaunch, *, with_secrets: bool, check_aborts: bool = True) -> Any:
    from backend.cluster.plan import collect_secrets, render
    from backend.nodes.registry import resolve_nodes
    from backend.recipes import get_recipe, parse_overrides

    recipe = get_recipe(request.recipe)
    if not check_aborts:  # the preview of a refused launch: what it would run (the refusal is a problem)
        recipe = recipe.model_copy(update={"known_aborts": []})
    overrides = parse_overrides(recipe, list(request.overrides))
    nodes = resolve_nodes(list(request.nodes))
    secrets = collect_secrets(recipe) if with_secrets else {}
    return render(recipe, nodes, overrides, secrets=secrets, allow_unpinned=request.allow_unpinned)


def cluster_plan(kind: WriteKind, pod: str | None, request: Any) -> WritePlan:
    """The exact plan the confirm gate shows for a node or recipe write."""
    from backend import paths

    problems = tuple(cluster_problems(kind, pod, request))
    if kind == "node_add" and isinstance(request, NewNode):
        lines = [f"add node {request.name} to {paths.nodes_file()} (mode 0600):", f"  host     {request.host}", f"  ssh      {request.ssh}"]
        lines.append(f"  ssh key  {request.ssh_key}" if request.ssh_key else "  ssh key  (the agent's or the default key)")
        lines.append("a node whose host is this machine is driven without SSH")
        return WritePlan("node_add", f"Add node {request.name}", tuple(lines), request.name, request, problems=problems)
    if kind == "node_rm":
        return WritePlan("node_rm", f"Remove node {pod}", tuple(_node_rm_lines(pod or "")), pod, problems=problems)
    if kind == "recipe_launch" and isinstance(request, RecipeLaunch):
        lines = _launch_lines(request)
        return WritePlan("recipe_launch", f"Launch recipe {request.recipe}", tuple(lines), request.recipe, request, problems=problems)
    if kind == "recipe_stop":
        return WritePlan("recipe_stop", f"Stop profile {pod}", tuple(_stop_lines(pod or "")), pod, problems=problems)
    raise Refused(f"unknown write {kind}")


def _node_rm_lines(name: str) -> list[str]:
    from backend import paths
    from backend.nodes.registry import load_registry
    from backend.profiles import list_profiles

    node = next((n for n in load_registry().nodes if n.name == name), None)
    lines = [f"remove node {name}" + (f" ({node.host}, ssh {node.ssh})" if node else "") + f" from {paths.nodes_file()}"]
    users = [p.name for p in list_profiles() if name in p.nodes]
    if users:
        lines.append(f"profile(s) {', '.join(users)} name this node: they cannot be acted on until it is registered again")
    lines.append("nothing on the node itself is touched")
    return lines


def _launch_lines(request: RecipeLaunch) -> list[str]:
    """The dry-run, node by node; when the plan is refused (unpinned image, an override known to
    abort), the dry-run it would be: the refusal itself is among the plan's problems."""
    try:
        plan = _render(request, with_secrets=True)
    except C3Error:
        try:
            plan = _render(replace(request, allow_unpinned=True), with_secrets=True, check_aborts=False)
        except C3Error as error:
            return [f"launch {request.recipe} on {', '.join(request.nodes) or 'no nodes'}: {error.message}"]
    from backend.cluster.control import active_to_stand_down

    lines = plan.describe()
    current = active_to_stand_down(plan.profile)
    if current:
        lines.insert(0, f"first: stop the active profile {current} (one profile is active at a time)")
    lines.append(f"then wait up to {plan.recipe.startup_grace_s} s for rank 0; write profile {plan.profile} and make it active")
    return lines


def _stop_lines(name: str) -> list[str]:
    from backend.cluster.control import running_ranks
    from backend.profiles import load_profile

    try:
        ranks = running_ranks(load_profile(name))
    except C3Error as error:
        return [f"stop profile {name}: {error.message}"]
    lines = [f"node {rp.node.name} (rank {rp.rank}, {'local' if rp.node.local else 'ssh ' + rp.node.ssh}): $ docker rm -f {rp.container}" for rp in ranks]
    lines.append("remember the stop: the watchdog leaves it stopped until the next launch")
    return lines


# -- execute -----------------------------------------------------------------------------------------
def cluster_execute(plan: WritePlan, progress: ProgressCallback) -> WriteResult:
    if plan.kind == "node_add" and isinstance(plan.request, NewNode):
        from backend.nodes.registry import add_node

        r = plan.request
        node = add_node(r.name, r.host, r.ssh, r.ssh_key or None)
        where = "this machine (no SSH)" if node.local else f"over ssh {node.ssh}"
        return WriteResult(True, f"added node {node.name}: {node.host}, driven {where}", "it is probed on the next refresh")
    if plan.kind == "node_rm" and plan.pod:
        from backend.nodes.registry import remove_node

        node = remove_node(plan.pod)
        return WriteResult(True, f"removed node {node.name} from the registry")
    if plan.kind == "recipe_launch" and isinstance(plan.request, RecipeLaunch):
        return _launch(plan.request, progress)
    if plan.kind == "recipe_stop" and plan.pod:
        from backend.cluster.control import stop
        from backend.profiles import load_profile

        profile = load_profile(plan.pod)
        asyncio.run(stop(profile, why="c3 cockpit stop"))
        return WriteResult(True, f"stopped profile {profile.name} on {', '.join(profile.nodes)}", "the stop is remembered: the watchdog leaves it stopped")
    raise Refused(f"unknown write {plan.kind}")


def _launch(request: RecipeLaunch, progress: ProgressCallback) -> WriteResult:
    from backend.cluster.launch import launch

    plan = _render(request, with_secrets=True)
    started = time.monotonic()
    steps: list[str] = []

    def say(line: str) -> None:
        steps.append(line)
        progress(BootProgress(plan.profile, line, time.monotonic() - started, tuple(steps[-4:])))

    say(f"launching {request.recipe} on {', '.join(request.nodes)}")
    try:
        profile = asyncio.run(launch(plan, wait=True, say=say))
    except C3Error:
        progress(BootProgress(plan.profile, "failed", time.monotonic() - started, tuple(steps[-4:]), done=True, ok=False))
        raise
    progress(BootProgress(plan.profile, "serving", time.monotonic() - started, tuple(steps[-4:]), done=True, ok=True))
    return WriteResult(True, f"profile {profile.name} is active: {profile.base_url} (model {profile.model})", "point clients at it: eval \"$(c3 profile env)\"")
