"""A live source: a daemon thread that fetches, publishes, and survives failures.

A failing fetch marks the source stale (since the first failure), keeps its last good value and
retries with backoff; nothing it raises escapes the thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from backend.live.models import SourceStatus


def now() -> datetime:
    return datetime.now(UTC)


class Source:
    """Runs `fetch()` every `interval_s`; calls `publish(self)` after each attempt."""

    def __init__(self, name: str, fetch: Callable[[], Any], *, interval_s: float = 1.0, max_backoff_s: float = 10.0) -> None:
        self.name = name
        self._fetch = fetch
        self.interval_s = interval_s
        self.max_backoff_s = max_backoff_s
        self.value: Any = None
        self._status = SourceStatus(name=name, ok=False)
        self._stop = threading.Event()
        self._resume = threading.Event()
        self._resume.set()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.publish: Callable[[Source], None] = lambda _s: None

    @property
    def status(self) -> SourceStatus:
        return self._status.model_copy(update={"paused": not self._resume.is_set()})

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"c3-live-{self.name}", daemon=True)
            self._thread.start()

    def stop(self, join_s: float = 2.0) -> None:
        self._stop.set()
        self._resume.set()
        self._wake.set()
        self.interrupt()
        if self._thread is not None:
            self._thread.join(join_s)

    def interrupt(self) -> None:
        """Unblock a fetch that waits on I/O (subclasses with blocking streams override)."""

    def pause(self) -> None:
        self._resume.clear()

    def resume(self) -> None:
        self._resume.set()
        self._wake.set()

    def poke(self) -> None:
        """Fetch now rather than at the next tick."""
        self._wake.set()

    def step(self) -> bool:
        """One fetch attempt (also what tests call directly); True on success."""
        try:
            value = self._fetch()
        except Exception as error:  # a source must never crash the hub or the cockpit
            text = (str(error).splitlines() or [type(error).__name__])[0][:200] or type(error).__name__
            self._status = self._status.model_copy(update={"ok": False, "error": text, "stale_since": self._status.stale_since or now()})
            return False
        self.value = value
        self._status = SourceStatus(name=self.name, ok=True, last_ok=now())
        return True

    def _run(self) -> None:
        backoff = self.interval_s
        while not self._stop.is_set():
            self._resume.wait()
            if self._stop.is_set():
                break
            ok = self.step()
            try:
                self.publish(self)
            except Exception:  # a subscriber's bug is not the source's failure
                pass
            backoff = self.interval_s if ok else min(max(backoff * 2, 0.5), self.max_backoff_s)
            self._wake.wait(self.interval_s if ok else backoff)
            self._wake.clear()
