"""Container changes from the Docker event stream (in a thread; reconnect with backoff).

Every event (start, die, stop, destroy, health_status …) triggers a fresh list of the workloads, so
the snapshot is always a whole, consistent list rather than a patched one. When the stream breaks,
the source re-lists (marking itself stale if that fails too) and reconnects after a backoff.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from backend.live.source import Source


class EventSource(Source):
    """Workloads, refreshed on every container event."""

    def __init__(self, name: str, fetch: Callable[[], Any], open_stream: Callable[[], Iterator[Any]], *, max_backoff_s: float = 10.0, resync_s: float = 30.0) -> None:
        super().__init__(name, fetch, interval_s=resync_s, max_backoff_s=max_backoff_s)
        self._open_stream = open_stream
        self._stream: Any = None
        self._lock = threading.Lock()
        self.events_seen = 0

    def interrupt(self) -> None:
        with self._lock:
            stream = self._stream
        close = getattr(stream, "close", None)
        if close is not None:
            try:
                close()
            except Exception:
                pass

    def _publish(self) -> None:
        try:
            self.publish(self)
        except Exception:
            pass

    def _run(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            self._resume.wait()
            if self._stop.is_set():
                break
            ok = self.step()
            self._publish()
            if not ok:
                self._wake.wait(backoff)
                self._wake.clear()
                backoff = min(backoff * 2, self.max_backoff_s)
                continue
            try:
                stream = self._open_stream()
                with self._lock:
                    self._stream = stream
                for _event in stream:
                    if self._stop.is_set():
                        break
                    self.events_seen += 1
                    self.step()
                    self._publish()
                    if not self._resume.is_set():
                        break  # paused: drop the stream, re-list on resume
                backoff = 0.5
            except Exception:  # the daemon went away or the stream broke: re-list and reconnect
                pass
            finally:
                self.interrupt()
                with self._lock:
                    self._stream = None
            if not self._stop.is_set():
                self._wake.wait(backoff)
                self._wake.clear()
                backoff = min(backoff * 2, self.max_backoff_s)
