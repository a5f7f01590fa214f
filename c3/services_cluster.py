"""The Nodes and Recipes modes' reads over the real backend (used by `services_real`): node health,
running pools, the active profile, a recipe's overrides as typed. Their writes are `backend.actions`.

Everything here blocks (SSH, HTTP, files); the app calls it from thread workers. The asyncio parts
of the backend (`probe_nodes`) run in a fresh event loop of the worker's own thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

from backend.errors import C3Error
from c3.services import NodeGpuRow, NodeRow, PoolBackendRow, PoolRow, ProfileRow


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
