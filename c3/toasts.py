"""Which of c3's toasts are on screen, and which wait for a modal to close — on Textual's public API.

No toast lands on a modal: at 80×24 one covers the form's fields or its buttons. What c3 has to say
while a modal is up waits; when a modal opens over toasts still showing, all of them are taken off
(`App.clear_notifications`: Textual has no public call to withdraw a single toast) and the ones
still worth saying come back when a mode screen is on top again:
- trouble (`Attention`) comes back only if it is still current (the caller decides, by key);
- a write's result comes back with its full timeout: the operator has not read it yet, and the
  result line under the pod view keeps only the last one.
Textual's own toasts (none c3 relies on) are dropped with them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from textual.app import App

Severity = Literal["information", "warning", "error"]


@dataclass(frozen=True)
class Toast:
    """One toast as c3 asked for it."""

    message: str
    title: str = ""
    severity: Severity = "information"
    timeout: float = 5.0
    key: Hashable | None = None
    """Trouble toasts carry their trouble's key: they come back only while it is current."""
    raised_at: float = field(default=0.0, compare=False)


class ToastDesk:
    """Posts c3's toasts through `App.notify`, or holds them while `covered()` says a modal is up."""

    def __init__(self, app: App[Any], covered: Callable[[], bool], clock: Callable[[], float] = time.monotonic) -> None:
        self._app = app
        self._covered = covered
        self._clock = clock
        self.showing: list[Toast] = []
        """Posted and not yet timed out (as far as c3 knows)."""
        self.held: list[Toast] = []
        """Waiting for the modal to close, oldest first."""

    def post(self, toast: Toast) -> None:
        if self._covered():
            self.held.append(toast)
            return
        now = self._clock()
        self.showing = [t for t in self.showing if t.raised_at + t.timeout > now]
        self.showing.append(Toast(toast.message, toast.title, toast.severity, toast.timeout, toast.key, raised_at=now))
        self._app.notify(toast.message, title=toast.title, severity=toast.severity, timeout=toast.timeout, markup=False)

    def cover(self) -> None:
        """A modal opens (call before it is pushed, so the screen below drops its toasts too): every
        toast still showing is taken off and held."""
        now = self._clock()
        live = [t for t in self.showing if t.raised_at + t.timeout > now]
        self.showing = []
        if live:
            self.held[:0] = live
            self._app.clear_notifications()
            # A toast posted just before is still a message in the queue: once it has landed, again.
            self._app.call_later(lambda: self._app.clear_notifications() if self._covered() else None)

    def uncover(self, still_current: Callable[[Hashable], bool]) -> None:
        """A mode screen is on top again: post what was held, trouble only if `still_current(key)`;
        the same message held twice is said once."""
        held, self.held = self.held, []
        said: set[tuple[str, str]] = set()
        for toast in held:
            if (toast.key is not None and not still_current(toast.key)) or (toast.message, toast.title) in said:
                continue
            said.add((toast.message, toast.title))
            self.post(toast)
