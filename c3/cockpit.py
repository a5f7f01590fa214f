"""What the cockpit's screens and modals may ask of the app: the typed face of `C3App` (c3/app.py).

Screens and modals reach it as `self.cockpit` (c3/screens/base.py) instead of an untyped `self.app.…`.
It is a Protocol rather than `C3App` itself because the app imports the screens: naming the app from
them would tie the modules into a cycle (tests/arch/test_cycles.py counts `TYPE_CHECKING` imports).
c3/app.py checks that `C3App` satisfies it, so mypy holds both sides.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from c3.services import BootProgress, PodState, Services, WriteRequest, WriteResult
from c3.trouble import TroubleWatch


class Cockpit(Protocol):
    """The app's state and calls that screens and modals use (Textual's own API stays on `self.app`)."""

    @property
    def services(self) -> Services | None:
        """The facade, once built in its worker."""

    @property
    def readonly(self) -> bool:
        """`c3 --readonly` (or a read-only facade): every write is refused."""

    @property
    def pushed(self) -> bool | None:
        """The live hub pushes GPU and pod changes; None until the subscription answered."""

    @property
    def clock(self) -> Callable[[], datetime]:
        """Read on the event loop for "as of" stamps."""

    @property
    def trouble(self) -> TroubleWatch:
        """The pods in trouble, counted in the mode bar."""

    @property
    def boots(self) -> dict[str, BootProgress]:
        """c3's own boots in flight, by pod."""

    @property
    def last_result(self) -> WriteResult | None:
        """The last write's result, shown under the lists."""

    @property
    def launch_progress(self) -> BootProgress | None:
        """The last step of the running (or last) recipe launch."""

    def ready(self) -> Services | None:
        """The facade once it exists; otherwise None, and says so."""

    def refused_readonly(self, key: str, pod: str | None = None) -> bool:
        """Under --readonly: refuse the write `key` (and say why) before anything is asked for."""

    def request_write(self, key: str, *, pod: str | None = None, request: WriteRequest | None = None) -> None:
        """Plan → confirm gate → re-validate and execute → show the result."""

    def as_shown(self, pods: list[PodState]) -> list[PodState]:
        """Pod readings as every view shows them beside the boot panel."""

    def pods_read(self, pods: list[PodState], *, stale: bool = False) -> None:
        """Every pod reading passes here (trouble counting and announcing)."""

    def pod_seen(self, pod: PodState) -> None:
        """A view read one pod afresh (details): the pod view takes that reading too."""

    def open_details(self, pod: str) -> None:
        """The details modal of that pod."""

    def open_edit(self, pod: str) -> None:
        """The pod form prefilled with that pod's settings (`e`: `c3 pod edit`)."""

    def open_try(self, pod: str) -> None:
        """The test-prompt modal of that pod (`t`: `c3 pod try`)."""

    def open_logs(self, pod: str) -> None:
        """The log viewer of that pod."""
