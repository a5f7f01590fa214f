"""Tests send traffic only to loopback or to the rig's test hosts: the guard (tests/plugins/netguard_socket.py)
stops everything else before the kernel, and the session fails listing what it stopped.

The session that starts without `C3_TEST_NETGUARD` (a plain run, or xdist's controller) makes the records
folder, sets the variable for itself and so for everything it starts (xdist workers, `c3` run as a
process, whose venv's `c3_test_netguard.pth` loads the guard), guards its own process, and at the end
reads every process's records. Workers and nested pytest runs find the variable set and only guard
themselves; their records land in the same folder, so nothing needs forwarding.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tests.plugins import netguard_socket as guard

PTH_NAME = "c3_test_netguard.pth"
"""Written into the test venv's site-packages by scripts/test.py's `ensure_venv`."""
_session: dict[str, str] = {"owned": ""}
_found: list[str] = []


def records(folder: str | Path) -> list[dict[str, object]]:
    """Every refusal recorded under `folder`, in no particular order."""
    found: list[dict[str, object]] = []
    for path in sorted(Path(folder).glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                found.append(json.loads(line))
            except ValueError:
                continue  # a line cut short by a process killed mid-write
    return found


def pth_installed() -> bool:
    """Does this interpreter's venv load the guard in child processes?"""
    return any((Path(p) / PTH_NAME).exists() for p in sys.path if p.endswith("site-packages"))


def pytest_configure(config: pytest.Config) -> None:
    folder = os.environ.get(guard.ENV, "")
    if not folder:
        folder = tempfile.mkdtemp(prefix="c3-netguard-")
        os.environ[guard.ENV] = folder
        _session["owned"] = folder
    guard.install(folder)


@pytest.hookimpl(trylast=True)  # after xdist's own, which waits for the workers' session ends
def pytest_sessionfinish(session: pytest.Session) -> None:
    folder = _session["owned"]
    if not folder:
        return
    seen = sorted({(str(r.get("test")), str(r.get("address")), str(r.get("port")), str(r.get("via"))) for r in records(folder)})
    if seen:
        _found.append(f"netguard: {len(seen)} connection(s) to addresses outside this machine were refused (EHOSTUNREACH);"
                      " tests may reach loopback, the rig's 10.213.0.0/16 / fdc3:213::/32 hosts, or 198.51.100.0/24 for a host that is down:")
        _found.extend(f"netguard:   {test}: {address} port {port} ({via})" for test, address, port, via in seen)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if not pth_installed():
        _found.append(f"netguard: warning: no {PTH_NAME} in this venv, so child Python processes ran unguarded; "
                      "run the tests through scripts/test.py, which writes it")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in _found:
        terminalreporter.write_line(line, red=line.startswith("netguard:   ") or "refused" in line)


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = _session["owned"]
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
        if os.environ.get(guard.ENV) == folder:
            del os.environ[guard.ENV]
        _session["owned"] = ""
