"""pytest plugin for scripts/test.py's phases (`-p scripts.phase_report`): the session's outcome counts,
as pytest's own summary line counts them, written as JSON to `$C3_PHASE_REPORT`, so the test command can
close a run of several pytest sessions with one summary line over all of them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    path = os.environ.get("C3_PHASE_REPORT")
    if not path or hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller counts for all
        return
    counts = {}
    for key, reports in terminalreporter.stats.items():
        if key:  # "" holds the passing setup/teardown reports pytest does not count either
            counts[key] = sum(1 for report in reports if getattr(report, "count_towards_summary", True))
    Path(path).write_text(json.dumps({"counts": counts, "exitstatus": int(exitstatus)}) + "\n")
