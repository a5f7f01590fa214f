"""The fork path judges like the real-process path (tests/cli/forkserver.py, issue 22).

Planted breaches (tests/cli/planted.py) — a traceback, a second error format, exit 4, a silent
failure, `sys.exit("text")`, a write before failing, a raising atexit handler, a raising thread the
shutdown waits for, a fatal signal, a command that never ends — run once as a real `c3` process
and once forked from a warm server that has them planted the same way: both must be flagged, with
the same problems, exit code and output. The interpreter's own shutdown runs in the fork (atexit,
threads, the final flush on a closed pipe), so those breaches are the ones an imitation would miss.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.cases import SLUG
from tests.cli.forkserver import ForkServer
from tests.cli.harness import C3, FORKS, ROOT, base_env, contract_problems, fork_failure, fresh_dirs, run_c3, server_env
from tests.cli.planted import SITECUSTOMIZE

PLANTS = [
    ("traceback", "printed a traceback"),
    ("second-format", "stderr mixes another error format"),
    ("exit4", "exit code 4 is not one of 0,1,2,3"),
    ("silent", "failed without a `c3: error: …` line on stderr"),
    ("exit-message", "failed without a `c3: error: …` line on stderr"),
    ("writes", "failed but changed files: ['C3_HOME/planted.txt']"),
    ("atexit-raises", "printed a traceback"),
    ("thread-raises", "printed a traceback"),
    ("signalled", "exit code -11 is not one of 0,1,2,3"),
]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """PYTHONPATH that plants `c3 breach …` at interpreter start, and a fork server started with it."""
    site = tmp_path_factory.mktemp("planted")
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    pythonpath = os.pathsep.join([str(site), str(ROOT)])
    # C3_RIG: a variable no case of this module sets, which must not reach a child (test below).
    server = ForkServer({**server_env(), "PYTHONPATH": pythonpath, "C3_RIG": "does-not-exist.yaml"})
    yield pythonpath, server
    server.close()


def _both_ways(planted, base: Path, argv: list[str], timeout: float = 60.0):
    pythonpath, server = planted
    outcomes = {}
    for way in ("process", "fork"):
        dirs = fresh_dirs(base / way)
        env = base_env(dirs, extra={"PYTHONPATH": pythonpath})
        outcomes[way] = run_c3(argv, dirs, env=env, timeout=timeout, real=way == "process", forks=server)
    return outcomes["process"], outcomes["fork"]


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


@pytest.mark.parametrize("command, expected", PLANTS, ids=[c for c, _ in PLANTS])
def test_a_planted_breach_is_flagged_by_both_paths(planted, tmp_path, command, expected):
    process, fork = _both_ways(planted, tmp_path, ["breach", command])
    flagged = contract_problems(process)
    assert any(expected in problem for problem in flagged), f"the real process was not flagged with {expected!r}\n{process.describe()}"
    assert contract_problems(fork) == flagged, f"process:\n{process.describe()}\n\nfork:\n{fork.describe()}"
    assert (fork.rc, fork.stdout, fork.changed) == (process.rc, process.stdout, process.changed), f"{process.describe()}\n\n{fork.describe()}"
    # Traceback frames differ (console script vs fork server); what was raised and said may not.
    assert _last_line(fork.stderr) == _last_line(process.stderr), f"{process.describe()}\n\n{fork.describe()}"
    assert fork.stderr.count("Traceback") == process.stderr.count("Traceback")


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state == "Z"  # killed, waiting for init to reap it


@pytest.mark.parametrize("way", ["process", "fork"])
def test_the_deadline_kills_the_whole_group(planted, tmp_path, way):
    """A command that never ends is killed at the deadline with the grandchild it started."""
    pythonpath, server = planted
    for attempt, deadline in enumerate((5.0, 20.0, 60.0)):  # longer only if the box was too busy to start it in time
        pidfile = tmp_path / f"pid{attempt}"
        dirs = fresh_dirs(tmp_path / f"home{attempt}")
        env = base_env(dirs, extra={"PYTHONPATH": pythonpath})
        outcome = run_c3(["breach", "hang", str(pidfile)], dirs, env=env, timeout=deadline, real=way == "process", forks=server)
        if pidfile.exists() and pidfile.read_text():
            break
    assert outcome.timed_out and outcome.rc == -9, outcome.describe()
    assert contract_problems(outcome) == ["did not finish before the deadline", "exit code -9 is not one of 0,1,2,3"]
    grandchild = int(pidfile.read_text())
    waited = time.monotonic() + 30
    while not _gone(grandchild) and time.monotonic() < waited:
        time.sleep(0.05)
    assert _gone(grandchild), f"the grandchild {grandchild} outlived the deadline"


@pytest.mark.parametrize("argv", [("gpus",), ("catalog", "--json"), ("fit", SLUG, "--gpus", "0"), ("--help",)], ids=" ".join)
def test_a_closed_stdout_ends_alike(tmp_path, argv):
    """`c3 … | head`: the interpreter's final flush on a closed pipe happens in the fork as in a process."""
    dirs = fresh_dirs(tmp_path / "base")
    env = base_env(dirs)
    results = []
    for way in ("process", "fork"):
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            if way == "process":
                done = subprocess.run([C3, *argv], stdout=write_end, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env,
                                      cwd=dirs["files"], timeout=60, check=False)
                results.append((done.returncode, done.stderr))
            else:
                raw = FORKS.run(list(argv), argv0=C3, env=env, cwd=str(dirs["files"]), timeout=60, stdout=write_end)
                results.append((raw.rc, raw.stderr))
        finally:
            os.close(write_end)
    assert results[0] == results[1] == (0, b""), results


def test_each_fork_reads_its_own_environment(tmp_path):
    """Nothing read in one case (settings, C3_HOME, the rig) reaches the next: the server itself
    never runs a command, and each child takes its case's environment before c3 reads any."""
    seen = []
    for name in ("alpha", "beta"):
        dirs = fresh_dirs(tmp_path / name)
        (dirs["home"] / "estate.yml").write_text(f"schema_version: 1\nestate:\n- name: {name}\n  slug: {SLUG}\n  gpus: [0]\n  port: 8020\n")
        outcome = run_c3(["pod", "list"], dirs)
        assert outcome.rc == 0, outcome.describe()
        seen.append(outcome.stdout)
    assert "alpha" in seen[0] and "beta" not in seen[0], seen
    assert "beta" in seen[1] and "alpha" not in seen[1], seen
    bad = fresh_dirs(tmp_path / "bad")
    refused = run_c3(["gpus"], bad, env=base_env(bad, extra={"C3_RUNTIME": "bogus"}))
    assert refused.rc == 2 and "C3_RUNTIME" in refused.stderr, refused.describe()
    after = run_c3(["gpus"], bad)
    assert after.rc == 0, after.describe()


def test_a_variable_the_case_lacks_is_gone_in_the_fork(planted, tmp_path):
    """The planted server was started with C3_RIG=does-not-exist.yaml; a case without C3_RIG must
    not see it (the child's environment is the case's, not the server's plus the case's)."""
    pythonpath, server = planted
    dirs = fresh_dirs(tmp_path / "home")
    env = base_env(dirs, rig=None, extra={"PYTHONPATH": pythonpath})
    assert "C3_RIG" not in env
    forked = run_c3(["gpus", "--json"], dirs, env=env, forks=server)
    real = run_c3(["gpus", "--json"], dirs, env=env, real=True)
    assert (forked.rc, forked.stdout, forked.stderr) == (real.rc, real.stdout, real.stderr), f"{real.describe()}\n\n{forked.describe()}"
    assert "does-not-exist" not in forked.stderr, forked.describe()


def test_the_fork_server_starts():
    """The sweep falls back to real processes when the server cannot start (so no case is lost):
    this is the one test that fails for it, with the server's log."""
    dirs_env = server_env()
    raw = FORKS.run(["--version"], argv0=C3, env=dirs_env, cwd=str(ROOT), timeout=60)
    assert raw.rc == 0 and raw.stdout.startswith(b"c3, version"), raw
    assert fork_failure() is None, fork_failure()
