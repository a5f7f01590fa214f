"""Where a front end's process begins and ends: the one settings object and, for `c3 demo`, the
simulated world.

The CLI's `main` (which also starts the cockpit) wraps every command in `command_settings()`: the
settings are built from the environment once, here, so a bad `C3_*` value is one usage line before
anything runs, and everything below reads them through `backend.settings.current()`. `c3 demo`
calls `enter_demo()` instead of editing the environment: it installs the demo's own settings (its
folders, the built-in rig, the simulated runtime) for the rest of the process. Each demo cockpit
then holds a `DemoLease`; releasing the last one stops the demo's stub engines.

Front ends never import `backend.settings` or `backend.sim` themselves (the front-door contract):
these are the entry points that build and install them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from backend.settings import Settings


@contextmanager
def command_settings(*, now: bool = True) -> Iterator[None]:
    """Build the settings from the environment once and install them for one command (raises
    `UsageError` naming the variable when a `C3_*` value is malformed).

    `now=False` (the CLI asked for a help page or the version) builds nothing: those read no setting,
    and building them costs pydantic's import. Should a command run after all, `current()` reads the
    environment when it is first asked, with the same rules and the same error."""
    if not now:
        yield
        return
    from backend import settings

    with settings.using(settings.load()):
        yield


def enter_demo(startup_delay_s: float = 3.0) -> Settings:
    """Install the demo's settings for the rest of this process (the cockpit's threads read them) and
    write its folders and catalog entry. Inside a process the demo started, the settings stay as they are."""
    from backend import settings
    from backend.sim.demo import demo_settings

    return settings.install(demo_settings(startup_delay_s))


@dataclass
class DemoLease:
    """One demo cockpit's hold on the demo's pods (`$C3_STATE/demo/leases/`)."""

    path: Path | None
    """The lease file (None once released)."""

    def release(self) -> list[str]:
        """Give the lease back; when no other live demo holds one, stop the demo's pods (their names
        are returned). Releasing twice does nothing the second time."""
        from backend.sim.demo import leave_demo, stop_demo_pods, stop_gateway

        lease, self.path = self.path, None
        if lease is None or not leave_demo(lease):
            return []
        stop_gateway()  # first, so it boots nothing more while the pods stop
        return stop_demo_pods()


def start_demo_gateway(port: int) -> str:
    """Start the demo's gateway (`c3 gateway serve` over the demo's estate, 127.0.0.1:`port`) unless a demo's
    already runs; one line for the user: where it answers, or why there is none."""
    from backend.sim.demo import start_gateway

    return start_gateway(port)


def join_demo() -> DemoLease:
    """Hold a lease on the demo's pods for this cockpit; `release()` it when the cockpit closes."""
    from backend.sim.demo import join_demo as take

    return DemoLease(take())
