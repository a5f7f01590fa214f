"""What every write that installs one systemd unit file shares (`pool install-service`, `gateway
install-service`): the plan is the unit's text, and the problems are its own checks, then
`systemd-analyze verify`'s verdict."""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path
from typing import Any

from backend.actions.base import Action, Plan, Problem, problems_of
from backend.errors import C3Error


class UnitInstall(Action):
    """An Action writing the unit file `path` with `text()`; a dataclass subclass whose fields are the
    request's keys, `bind` among them (the address the unit serves on names the write)."""

    bind: str

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> Any:
        return cls(**request)

    @property
    def target(self) -> str | None:
        return self.bind

    @property
    @abstractmethod
    def path(self) -> Path:
        """Where the unit goes."""

    @abstractmethod
    def text(self) -> str:
        """The unit file."""

    def check(self) -> None:
        """Raise C3Error when the unit cannot be written (default: when it cannot be rendered)."""
        self.text()

    def verify(self, text: str) -> tuple[bool | None, str]:
        """`systemd-analyze verify` on the text: (ok, output); ok is None when the tool is missing."""
        from backend.pool.service import verify_unit

        return verify_unit(text, self.path.name)

    def plan(self) -> Plan:
        try:
            text = self.text()
        except C3Error as error:
            return Plan(f"Install {self.path.name}", (f"install {self.path}: {error.message}",))
        return Plan(f"Install {self.path.name}", (f"# {self.path}", *text.splitlines()))

    def problems(self) -> list[Problem]:
        found = problems_of(self.check)
        if found:
            return found
        ok, output = self.verify(self.text())
        if ok is False:
            return [Problem(f"systemd-analyze verify rejected the unit: {output.splitlines()[0] if output else 'unknown error'}")]
        return []
