"""pytest plugin for scripts/test.py's phases (`-p scripts.phase_report`): the session's outcome counts,
as pytest's own summary line counts them, written as JSON to `$C3_PHASE_REPORT`, so the test command can
close a run of several pytest sessions with one summary line over all of them; and where the phase's time went:
the seconds of its tests (setup + call + teardown) summed by xdist group (the `@group` pytest-xdist appends to a
grouped test's id; "ungrouped" otherwise) and by worker, so that the group that holds a worker longest, the phase's
critical path under `--dist loadgroup`, can be read from one run (issue 22)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

_BY_GROUP: dict[str, float] = {}
_BY_WORKER: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    seconds = float(getattr(report, "duration", 0.0) or 0.0)
    tail = report.nodeid.rsplit("::", 1)[-1]
    suffix = tail.rsplit("@", 1)[1] if "@" in tail else ""
    # xdist appends `@group` after the test's parameters; an `@` inside them (`[user@host]`) is not one.
    group = suffix if suffix and "]" not in suffix else "ungrouped"
    _BY_GROUP[group] = _BY_GROUP.get(group, 0.0) + seconds
    node = getattr(report, "node", None)  # set by pytest-xdist on a worker's reports, in the controller
    worker = getattr(getattr(node, "gateway", None), "id", None) or "main"
    _BY_WORKER[worker] = _BY_WORKER.get(worker, 0.0) + seconds


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    path = os.environ.get("C3_PHASE_REPORT")
    if not path or hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller counts for all
        return
    counts = {}
    for key, reports in terminalreporter.stats.items():
        if key:  # "" holds the passing setup/teardown reports pytest does not count either
            counts[key] = sum(1 for report in reports if getattr(report, "count_towards_summary", True))
    times = {"by_group": {k: round(v, 1) for k, v in sorted(_BY_GROUP.items(), key=lambda kv: -kv[1])},
             "by_worker": {k: round(v, 1) for k, v in sorted(_BY_WORKER.items())}}
    if len(_BY_GROUP) > 1 or len(_BY_WORKER) > 1:
        terminalreporter.write_line("test seconds by xdist group: " + ", ".join(f"{k} {v:.0f}" for k, v in times["by_group"].items()))
        terminalreporter.write_line("test seconds by worker: " + ", ".join(f"{k} {v:.0f}" for k, v in times["by_worker"].items()))
    Path(path).write_text(json.dumps({"counts": counts, "exitstatus": int(exitstatus), **times}) + "\n")
