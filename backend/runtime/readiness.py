"""Waiting for a pod to serve: poll its health path on the host port while watching the workload.

Phases, reported with elapsed time: `starting` (no answer on the port), `loading` (the port answers but
the health path is not 200 yet), `ready`. A workload that exits, or a deadline that passes, ends the wait
with the engine's last log lines. An engine started with an API key (vLLM's `VLLM_API_KEY` or
`--api-key`) answers 401/403 on `/v1/*`: that is `auth`, not `loading` — the probe sends
`Authorization: Bearer $VLLM_API_KEY` when c3 has that variable, and a refusal ends the wait at once
with what to do instead of waiting out the deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from backend.http_probe import probe
from backend.runtime.models import Workload
from backend.settings import current

LOG_LINES_ON_FAILURE = 30


@dataclass(frozen=True)
class ReadyResult:
    """How the wait ended."""

    ok: bool
    elapsed_s: float
    phase: str
    """ready | exited | timeout | absent | auth."""
    detail: str = ""
    log_tail: str = ""


API_KEY_ENV = "VLLM_API_KEY"


def _api_key() -> str | None:
    key = current().vllm_api_key
    return key.get_secret_value() if key is not None and key.get_secret_value() else None


def probe_health(url: str, timeout: float = 3.0) -> str:
    """`ready` (HTTP 200), `auth` (401/403), `loading` (answers, not 200) or `starting` (no answer)."""
    return probe(url, timeout=timeout, api_key=_api_key(), max_bytes=64 * 1024).phase


def wait_ready(
    *,
    url: str,
    workload: Callable[[], Workload],
    logs: Callable[[int], str],
    timeout_s: float,
    progress: Callable[[str, float], None] | None = None,
    interval_s: float = 0.25,
    progress_every_s: float = 10.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    health: Callable[[str], str] = probe_health,
) -> ReadyResult:
    """Poll until the health path answers 200, the workload stops, or `timeout_s` passes."""
    start = clock()
    last_phase, last_report = "", start - progress_every_s
    delay = interval_s
    while True:
        elapsed = clock() - start
        state = workload()
        if not state.running:
            phase = "absent" if state.status == "absent" else "exited"
            code = f" (exit code {state.exit_code})" if state.exit_code is not None else ""
            return ReadyResult(False, elapsed, phase, f"the engine stopped during boot{code}", logs(LOG_LINES_ON_FAILURE))
        phase = health(url)
        if phase == "auth":
            if progress:
                progress("auth required", elapsed)
            sent = "the key in $" + API_KEY_ENV + " was refused" if _api_key() else "c3 has no key ($" + API_KEY_ENV + " is not set)"
            detail = (f"the engine answers but requires an API key (HTTP 401/403 on its health path; {sent}); "
                      f"set {API_KEY_ENV} in c3's environment to the engine's key — c3 sends it as a Bearer token")
            return ReadyResult(False, elapsed, "auth", detail, "")
        if phase == "ready":
            if progress:
                progress("ready", elapsed)
            return ReadyResult(True, elapsed, "ready")
        if progress and (phase != last_phase or clock() - last_report >= progress_every_s):
            progress(phase, elapsed)
            last_phase, last_report = phase, clock()
        if elapsed >= timeout_s:
            return ReadyResult(False, elapsed, "timeout", f"not serving after {timeout_s:.0f} s (last phase: {phase})", logs(LOG_LINES_ON_FAILURE))
        sleep(min(delay, max(0.05, timeout_s - elapsed)))
        delay = min(delay * 1.5, 1.0)
