"""The watchdog's one check, run by `c3 profile watchdog-check` (from a systemd timer, or by tests).

Relaunches the active profile's whole group when its endpoint stops answering — only after
`failures` consecutive failed probes, never inside the start-up grace period after a launch, never
within `cooldown_s` of its own last relaunch, and never while a deliberate stop is remembered
(`c3 profile stop`, `c3 recipes stop`, or stopping c3-cluster.service).
State (consecutive failures, last relaunch) lives in `$C3_STATE/watchdog/NAME.json`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from backend import paths
from backend.atomic import write_atomic
from backend.cluster.health import probe
from backend.errors import C3Error
from backend.profiles import Profile, active_name, is_stopped, load_profile
from backend.recipes import get_recipe
from backend.userfiles import read_json

DEFAULT_FAILURES = 3
DEFAULT_COOLDOWN_S = 600.0


@dataclass
class CheckResult:
    """What one check did."""

    action: str
    """ok | no-profile | stopped | grace | failing | cooldown | relaunched | relaunch-failed"""
    profile: str | None
    detail: str
    failures: int = 0

    def line(self) -> str:
        who = self.profile or "-"
        return f"watchdog {who}: {self.action} — {self.detail}"


def _state_path(name: str) -> Path:
    return paths.state_home() / "watchdog" / f"{name}.json"


def read_state(name: str) -> dict[str, Any]:
    """The profile's watchdog state ({} when there is none yet). A state file that is not a regular
    file, oversized or not JSON is one usage error: the round would write through it (a link to
    /dev/zero) and a FIFO must not hang the timer, so the operator removes it."""
    state = read_json(_state_path(name), what="watchdog state", missing_ok=True)
    return state if isinstance(state, dict) else {}


def _write_state(name: str, state: dict[str, Any]) -> None:
    write_atomic(_state_path(name), json.dumps(state, indent=1) + "\n", mode=0o600)


def _epoch(iso: str | None) -> float:
    if not iso:
        return 0.0
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return 0.0


def check(
    name: str | None = None,
    *,
    failures: int = DEFAULT_FAILURES,
    grace_s: float | None = None,
    cooldown_s: float = DEFAULT_COOLDOWN_S,
    relaunch: Callable[[Profile], None] | None = None,
    probe_fn: Callable[[str, str, float], tuple[bool, str]] = probe,
    now: float | None = None,
) -> CheckResult:
    """One watchdog round for the named (default: active) profile."""
    now = time.time() if now is None else now
    name = name or active_name()
    if not name:
        return CheckResult("no-profile", None, "no active profile")
    profile = load_profile(name)
    state = read_state(name)
    if is_stopped(name):
        if state.get("failures"):
            _write_state(name, {**state, "failures": 0})
        return CheckResult("stopped", name, "deliberately stopped; left alone until the next launch")
    try:
        recipe = get_recipe(profile.recipe)
        health_path, grace = recipe.health_path, float(recipe.startup_grace_s if grace_s is None else grace_s)
    except C3Error:
        health_path, grace = "/health", float(grace_s or 0)
    since = max(_epoch(profile.launched_at), float(state.get("last_relaunch", 0)))
    ok, detail = probe_fn(profile.base_url, health_path, 3.0)
    if ok:
        if state.get("failures"):
            _write_state(name, {**state, "failures": 0})
        return CheckResult("ok", name, detail)
    if now - since < grace:
        return CheckResult("grace", name, f"{detail}; within the {grace:.0f}s start-up grace period")
    count = int(state.get("failures", 0)) + 1
    state["failures"] = count
    if count < failures:
        _write_state(name, state)
        return CheckResult("failing", name, f"{detail} ({count}/{failures} consecutive failures)", count)
    last = float(state.get("last_relaunch", 0))
    if now - last < cooldown_s:
        _write_state(name, state)
        return CheckResult("cooldown", name, f"{detail}; relaunched {now - last:.0f}s ago, cooldown {cooldown_s:.0f}s", count)
    if relaunch is None:
        from backend.cluster.control import relaunch as relaunch_async
        from backend.remote.fleet import run_sync

        def relaunch(p: Profile) -> None:
            run_sync(relaunch_async(p, wait=False))

    state.update(failures=0, last_relaunch=now, last_reason=detail)
    _write_state(name, state)
    try:
        relaunch(profile)
    except C3Error as error:
        return CheckResult("relaunch-failed", name, f"{detail}; relaunch failed: {error.message}", count)
    return CheckResult("relaunched", name, f"{detail} after {count} consecutive failures; relaunched the whole group", count)
