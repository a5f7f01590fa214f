"""The Nodes and Recipes modes' reads over the real backend (used by `services_real`): node health,
running pools, the active profile, a recipe's overrides as typed. Their writes are `backend.actions`;
the reads are `backend.views`' named queries, turned into the cockpit's rows here.

Everything here blocks (SSH, HTTP, files); the app calls it from thread workers.
"""

from __future__ import annotations

from typing import Any

from c3.services import NodeGpuRow, NodeRow, PoolBackendRow, PoolRow, ProfileRow


# -- reads -------------------------------------------------------------------------------------------
def node_rows(svc: Any) -> list[NodeRow]:
    """The registry with live reachability, endpoint health and GPUs (all nodes concurrently)."""
    from backend.views.node_health import probe_registered_nodes

    # This machine's GPUs: the facade's own reading, the one the Orchestration mode shows (NVML, or
    # the simulated rig in the demo), never a second source that may disagree with it.
    readings = probe_registered_nodes(svc.gpu_snapshots)
    rows = []
    for reading in readings:
        st = reading.status
        gpus = tuple(NodeGpuRow(g.index, g.name, g.total_mib, g.used_mib) for g in st.gpus)
        rows.append(NodeRow(st.name, st.host, st.ssh, st.local, st.reachable, reading.detail, st.endpoint_ok, st.endpoint, gpus, st.gpu_error, reading.ssh_key))
    return rows


def pool_rows() -> list[PoolRow]:
    """Every running router (`c3 pool serve`) with its live per-backend numbers."""
    from backend.views.pools import running_pools

    rows = []
    for pool in running_pools(timeout_s=1.0):
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
    from backend.views.profiles import active_profile

    profile = active_profile()
    if profile is None:
        return None
    return _profile_row(profile)


def profile_rows() -> list[ProfileRow]:
    from backend.views.profiles import profile_list

    return [_profile_row(p) for p in profile_list().profiles]


def _profile_row(p: Any) -> ProfileRow:
    """A `backend.views.profiles.ProfileSummary` as the cockpit shows it."""
    return ProfileRow(p.name, p.recipe, tuple(p.nodes), p.base_url, p.stopped, p.active, p.status)


def override_problems(recipe_id: str, overrides: tuple[str, ...]) -> list[str]:
    """The modal's as-typed check of `--set` entries: the backend's own parser and known-abort rules,
    entry by entry so that each bad one gets its own line."""
    from backend.views.recipes import override_problems as check

    return check(recipe_id, overrides)
