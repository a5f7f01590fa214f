"""`c3 pool status` and the Nodes mode's pool panel: every running router, read live."""

from __future__ import annotations

from backend.pool.status import PoolStatus, read_pools


def running_pools(timeout_s: float = 2.0, skipped: list[str] | None = None) -> list[PoolStatus]:
    """Every router with a live status file, with its per-backend numbers as it answers them now;
    one that does not answer within `timeout_s` is listed with `reachable=False` and why. A status
    file c3 cannot read is left out, and why is appended to `skipped` (a warning to show)."""
    return read_pools(timeout_s=timeout_s, skipped=skipped)
