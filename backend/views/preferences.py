"""What a front end reads about its own configuration: how to draw (the settings' `C3_ASCII`) and where
files it saves for the user go. Named queries over `backend.settings` and `backend.paths`, so the
front ends never import either."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict


class DisplaySettings(BaseModel):
    """How the cockpit is drawn, as configured (the terminal's own locale is the front end's business)."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    ascii: bool | None
    """`C3_ASCII`: True draws ASCII only, False keeps Unicode, None lets the locale decide."""


def display_settings() -> DisplaySettings:
    """The drawing settings of the settings object in force."""
    from backend.settings import current

    return DisplaySettings(ascii=current().ascii)


def saved_log_path(pod: str, stamp: str) -> Path:
    """Where the log viewer saves a pod's log by default: `$C3_STATE/logs/<pod>-<stamp>.log`."""
    from backend import paths

    return paths.state_home() / "logs" / f"{pod}-{stamp}.log"
