"""`c3 pool status` and the Nodes mode's pool panel: every running router, read live."""

from __future__ import annotations

from backend.pool.status import PoolStatus, read_pools


def running_pools(timeout_s: float = 2.0) -> list[PoolStatus]:
    """Every router with a live status file, with its per-backend numbers as it answers them now;
    one that does not answer within `timeout_s` is listed with `reachable=False` and why."""
    return read_pools(timeout_s=timeout_s)
