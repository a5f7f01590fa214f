"""What every write has: a plan to show, problems that block or warn, and a run that reports progress.

Both front ends drive the same objects: the CLI prints `plan()` for `--dry-run`, refuses on the first
blocking problem and prints each `Progress` line; the cockpit shows `plan()` and `problems()` in its
confirm gate, re-asks `problems()` just before running, and runs `run()` in a thread worker.

Plain dataclasses (no pydantic): the cockpit imports these on its event loop.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

Severity = Literal["error", "warning", "noop"]


@dataclass(frozen=True)
class Problem:
    """Why a write cannot (or should not) run now."""

    message: str
    severity: Severity = "error"
    """`error` refuses the write; `warning` is shown and the write goes ahead; `noop`: the write would
    change nothing (the pod already runs, nothing to stop) — the confirm gate has nothing to confirm,
    the CLI runs it anyway and says so (exit 0)."""
    hint: str | None = None

    @property
    def blocking(self) -> bool:
        return self.severity == "error"

    def text(self) -> str:
        """One line, with the hint after an em dash (how the confirm gate lists it)."""
        return self.message + (f" — hint: {self.hint}" if self.hint else "")


@dataclass(frozen=True)
class Plan:
    """Exactly what a write will do, line by line, with the real names, GPUs, ports and files."""

    title: str
    lines: tuple[str, ...]
    destructive: bool = False
    """Stops or removes something (the confirm button is drawn as a warning)."""
    wide: bool = False
    """Long lines (a recipe launch's docker commands): the gate is drawn wider and scrolls."""
    confirm: tuple[str, str] | None = None
    """(key, label): the gate confirms only with this distinct choice, never with `y` (signalling a
    process that is no c3 pod's); None: the usual Confirm."""


@dataclass(frozen=True)
class Progress:
    """One step of a running write (a boot's phase, a launch's line)."""

    pod: str
    """The pod being booted — or, for a recipe launch, the profile."""
    phase: str
    elapsed_s: float
    log_tail: tuple[str, ...] = ()
    done: bool = False
    ok: bool = False
    line: str | None = None
    """The write's own new line, when this step carries one (a CLI prints exactly these); None for
    the once-a-second refreshes of a boot's log tail."""


class ProgressSink(Protocol):
    """Where a running write reports: the CLI prints `line`s, the cockpit updates its boot panel."""

    def __call__(self, step: Progress, /) -> object: ...


def ignore_progress(step: Progress, /) -> None:
    """A sink for callers that only want the outcome."""


@dataclass(frozen=True)
class Outcome:
    """What a write did, shown to the user whatever happened."""

    ok: bool
    message: str
    hint: str | None = None
    data: Any = None
    """The backend's own result for front ends that render more (a CLI prints a boot's log tail and
    placement from its `BootOutcome`s); never shown as is."""


class Action(ABC):
    """One write. Subclasses are small dataclasses built from typed inputs and registered by `key`."""

    key: ClassVar[str]
    """The registry name (`backend.actions.registry`): what the cockpit's keys and palette ask for."""
    doing: ClassVar[str]
    """What it does, for "refused to …" (`{target}`: the pod, node or profile)."""
    progress_panel: ClassVar[Literal["boot", "launch"] | None] = None
    """Where the cockpit shows this write's `Progress` while it runs (None: only the result)."""

    @classmethod
    @abstractmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> Action:
        """Build from what the cockpit knows: the workspace, the selected name and a form's input."""

    @abstractmethod
    def plan(self) -> Plan:
        """The plan the confirm gate and `--dry-run` show. Never raises for a bad target: the lines say it."""

    @abstractmethod
    def problems(self) -> list[Problem]:
        """Why it cannot run now (errors), what to know first (warnings), or that it would change nothing."""

    @abstractmethod
    def run(self, progress: ProgressSink) -> Outcome:
        """Do it. Raises `backend.errors.C3Error` on a refusal found only while running."""

    @property
    def target(self) -> str | None:
        """The pod, node or profile this write acts on (None for a stop-all or a create)."""
        return None

    @property
    def affects(self) -> tuple[str, ...]:
        """Pods whose boot progress this write ends (a stop, a removal): the cockpit clears them."""
        return ()

    @property
    def selects(self) -> str | None:
        """The pod the cockpit should select afterwards (a newly created one)."""
        return None


class PodFormAction(Action):
    """A write built from the workspace and one pod form (`request`: `NewPod`, `PodEdit`), after which the
    cockpit selects the pod the form names. Subclasses are dataclasses with the fields `ws` and `request`."""

    ws: Any
    request: Any

    if TYPE_CHECKING:
        def __init__(self, ws: Any, request: Any, **options: Any) -> None: ...  # the subclass's dataclass __init__

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> Any:
        return cls(ws, request)

    @property
    def selects(self) -> str | None:
        return str(self.request.name)


def blocking(problems: list[Problem]) -> list[Problem]:
    """The problems that refuse the write."""
    return [p for p in problems if p.blocking]


def refuse_on(problems: list[Problem]) -> None:
    """Raise the first blocking problem as a `Refused` (what a CLI does before running)."""
    from backend.errors import Refused

    first = next(iter(blocking(problems)), None)
    if first is not None:
        raise Refused(first.message, hint=first.hint)


def problems_of(*checks: Callable[[], object]) -> list[Problem]:
    """A write's refusal as its `problems()`: each check raises `C3Error` when the write cannot run;
    the first that does is the one blocking problem (with its hint), [] when all pass."""
    from backend.errors import C3Error

    for check in checks:
        try:
            check()
        except C3Error as error:
            return [Problem(error.message, hint=error.hint)]
    return []


def rank_stop_plan(title: str, what: str, ranks: Callable[[], Sequence[Any]], where: Callable[[Any], str]) -> Plan:
    """The plan of stopping a profile's or a recipe's ranks: one `docker rm -f` per rank's node (`where`
    says how the node is named), then the watchdog note; `what` names it when the ranks cannot be read."""
    from backend.errors import C3Error

    try:
        found = ranks()
    except C3Error as error:
        return Plan(title, (f"stop {what}: {error.message}",), destructive=True)
    lines = [f"node {where(rp)}: $ docker rm -f {rp.container}" for rp in found]
    lines.append("remember the stop: the watchdog leaves it stopped until the next launch")
    return Plan(title, tuple(lines), destructive=True)
