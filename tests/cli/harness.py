"""Run `c3` in a throw-away C3_HOME/C3_STATE and judge what it did.

The contract every command keeps (issue 2): bad input ends in one `c3: error: …` line (plus an
optional `hint: …`), exit 0/1/2/3, nothing written on failure, never a traceback. This module
discovers the command tree from click, seeds a realistic home (an estate, two local nodes, a user
catalog entry) and runs invocations with a deadline, killing the whole process group on timeout.

An invocation runs either as a real process through the `c3` console script (`real=True`) or,
by default, in a child forked from one warm interpreter (tests/cli/forkserver.py): same argv, env,
cwd, stdin and deadline, same `Outcome`, ~0.5 CPU-s of imports less per case. `C3_TEST_CLI_VIA=process`
runs everything as real processes (to compare the two paths, or if the fork path is in doubt).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import click

from tests.cli.forkserver import ForkServer, ForkServerDidNotStart

ROOT = Path(__file__).resolve().parents[2]
C3 = str(Path(sys.executable).with_name("c3"))

ESTATE = """schema_version: 1
estate:
- name: chat
  slug: vllm/qwen3-8b
  gpus: [0]
  port: 8020
"""
# Loopback nodes are "local" (driven without SSH); port 1 refuses at once, so nothing waits.
NODES = """{"schema_version": 1, "nodes": [
 {"name": "here", "host": "http://127.0.0.1:1", "ssh": "root@127.0.0.1:1"},
 {"name": "there", "host": "http://127.0.0.1:2", "ssh": "root@127.0.0.1:2"}]}
"""


def leaf_commands() -> list[tuple[tuple[str, ...], click.Command]]:
    """Every runnable (leaf) command of the click tree, with its path, e.g. (("pod", "create"), cmd)."""
    from c3.cli import cli

    found: list[tuple[tuple[str, ...], click.Command]] = []

    def walk(cmd: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd)
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None:
                    walk(sub, (*path, name))
        else:
            found.append((path, cmd))

    walk(cli, ())
    return found


def groups() -> list[tuple[str, ...]]:
    """Paths of the sub-groups (`pod`, `node`, …)."""
    from c3.cli import cli

    out: list[tuple[str, ...]] = []
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        sub = cli.get_command(ctx, name)
        if isinstance(sub, click.Group):
            out.append((name,))
    return out


def seed_home(base: Path) -> dict[str, Path]:
    """A home with an estate, two registered local nodes and junk input files next to it."""
    home, state, files = base / "home", base / "state", base / "files"
    for folder in (home, state, files, home / "catalog.d"):
        folder.mkdir(parents=True, exist_ok=True)
    (home / "estate.yml").write_text(ESTATE)
    (home / "nodes.json").write_text(NODES)
    (home / "nodes.json").chmod(0o600)
    (files / "bad.yaml").write_text("estate: [unclosed\n  - : :\n")
    (files / "bad.json").write_text('{"architectures": [ "x", }')
    (files / "list.yaml").write_text("- 1\n- 2\n")
    (files / "scalar.json").write_text("42\n")
    (files / "empty.txt").write_text("")
    (files / "binary.bin").write_bytes(b"\xff\xfe\x00\x81garbage\xc3\x28")
    (files / "unreadable.txt").write_text("schema_version: 1\n")
    (files / "unreadable.txt").chmod(0)
    (files / "adir").mkdir(exist_ok=True)
    return {"home": home, "state": state, "files": files, "units": base / "units"}


def digest(folder: Path) -> dict[str, str]:
    """Path → content hash (and mode) of every file under `folder`."""
    out: dict[str, str] = {}
    if not folder.exists():
        return out
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.name.startswith(".") and path.name.endswith(".lock") and path.is_file() and path.stat().st_size == 0:
            continue  # an flock sentinel (backend.atomic.locked) holds no data; leaving it is no partial write
        if path.is_symlink() or not path.is_file():
            out[rel] = "dir" if path.is_dir() else "other"
            continue
        try:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest() + oct(path.stat().st_mode)
        except OSError as exc:
            out[rel] = f"unreadable:{exc.errno}"
    return out


@dataclass
class Outcome:
    """What one invocation did."""

    argv: list[str]
    rc: int
    stdout: str
    stderr: str
    timed_out: bool = False
    changed: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return (f"c3 {' '.join(self.argv)!r} -> rc={self.rc}{' (timeout)' if self.timed_out else ''}\n"
                f"stdout: {self.stdout[-800:]!r}\nstderr: {self.stderr[-1500:]!r}\nchanged: {self.changed}")


def base_env(dirs: dict[str, Path], *, rig: str | None = "demo", extra: dict[str, str] | None = None) -> dict[str, str]:
    """An environment that never reaches the real daemon, the user's files or a real GPU runtime."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("C3_", "HF_", "OPENAI_", "DOCKER_", "PYTEST_"))}
    env.update(
        C3_HOME=str(dirs["home"]),
        C3_STATE=str(dirs["state"]),
        HOME=str(dirs["home"].parent / "userhome"),
        DOCKER_HOST="unix:///nonexistent/docker.sock",
        C3_RUNTIME="docker",  # the simulated runtime would start stub engines that outlive the test
        PYTHONDONTWRITEBYTECODE="1",
        LC_ALL="C.UTF-8",
        COLUMNS="120",
    )
    if rig is not None:
        env["C3_RIG"] = rig
    env.update(extra or {})
    return env


def server_env() -> dict[str, str]:
    """The fork server's own environment: what every case's environment shares (locale, bytecode,
    terminal width), none of the user's C3_/HF_/… variables. Each child then gets its case's env."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("C3_", "HF_", "OPENAI_", "DOCKER_", "PYTEST_"))}
    env.update(PYTHONDONTWRITEBYTECODE="1", LC_ALL="C.UTF-8", COLUMNS="120")
    return env


FORKS = ForkServer(server_env())
atexit.register(FORKS.close)
_fork_failure: list[str] = []  # why the fork server could not start, once: later cases run as real processes
_fork_lock = threading.Lock()  # cases run from several threads (tests/cli/runner.py, test_fuzz.py)


def via_process() -> bool:
    """Everything as real processes: asked for (`C3_TEST_CLI_VIA=process`), or the fork server failed to start."""
    return os.environ.get("C3_TEST_CLI_VIA") == "process" or bool(_fork_failure)


def fork_failure() -> str | None:
    """Why the fork server failed to start, if it did (tests/cli/test_forkserver.py turns it into one failed test)."""
    return _fork_failure[0] if _fork_failure else None


def _text(data: bytes) -> str:
    """Bytes as `subprocess.run(text=True, errors="replace")` decodes them under C.UTF-8 (universal newlines)."""
    return data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


def _run_process(argv: list[str], env: dict[str, str], cwd: str, timeout: float) -> tuple[int, bytes, bytes, bool]:
    """`c3 ARGV` through the console script, its own session; the whole group killed at the deadline."""
    proc = subprocess.Popen([C3, *argv], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=cwd, start_new_session=True)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    return proc.returncode, out, err, timed_out


def _run_forked(argv: list[str], env: dict[str, str], cwd: str, timeout: float) -> tuple[int, bytes, bytes, bool] | None:
    """`c3 ARGV` in a fork of the warm interpreter; None when the fork server cannot start (then: a real process)."""
    try:
        raw = FORKS.run(argv, argv0=C3, env=env, cwd=cwd, timeout=timeout)
    except ForkServerDidNotStart as error:
        # Not a thousand errors: this session gives up on forks, each case still runs as a process, and
        # tests/cli/test_forkserver.py fails once, naming why. (A server that dies mid-case fails that
        # case with its log; the next case starts a fresh one.)
        with _fork_lock:
            if not _fork_failure:
                _fork_failure.append(str(error))
        return None
    return raw.rc, raw.stdout, raw.stderr, raw.timed_out


def run_c3(argv: list[str], dirs: dict[str, Path], *, env: dict[str, str] | None = None, timeout: float = 30.0,
           real: bool = False, forks: ForkServer | None = None) -> Outcome:
    """Run `c3 ARGV` with stdin closed; kill its process group at the deadline. `real`: through the
    console script as a fresh process; else forked from `forks` (default: the session's warm
    interpreter, unless `via_process()`)."""
    env = env if env is not None else base_env(dirs)
    watched = {"C3_HOME": dirs["home"], "files": dirs["files"]}  # files: what --file/--config point at

    def snapshot() -> dict[str, str]:
        return {f"{label}/{rel}": value for label, folder in watched.items() for rel, value in digest(folder).items()}

    before = snapshot()
    cwd = str(dirs["files"])
    done: tuple[int, bytes, bytes, bool] | None = None
    if forks is not None and not real:
        raw = forks.run(argv, argv0=C3, env=env, cwd=cwd, timeout=timeout)  # an explicit server: no fallback
        done = raw.rc, raw.stdout, raw.stderr, raw.timed_out
    elif not real and not via_process():
        done = _run_forked(argv, env, cwd, timeout)
    rc, out, err, timed_out = done if done is not None else _run_process(argv, env, cwd, timeout)
    after = snapshot()
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    return Outcome(argv=argv, rc=rc, stdout=_text(out), stderr=_text(err), timed_out=timed_out, changed=changed)


def contract_problems(outcome: Outcome, *, may_write: bool = False, group_help_ok: bool = False) -> list[str]:
    """What this outcome does against the CLI contract (empty when it keeps it)."""
    problems: list[str] = []
    if outcome.timed_out:
        problems.append("did not finish before the deadline")
    if "Traceback" in outcome.stderr or "Traceback" in outcome.stdout:
        problems.append("printed a traceback")
    if outcome.rc not in (0, 1, 2, 3):
        problems.append(f"exit code {outcome.rc} is not one of 0,1,2,3")
    if outcome.rc != 0 and not outcome.timed_out:
        lines = [line for line in outcome.stderr.splitlines() if line.strip()]
        is_help = group_help_ok and outcome.rc == 2 and "Usage:" in outcome.stdout
        if not is_help and not any(line.startswith("c3: error: ") for line in lines):
            problems.append("failed without a `c3: error: …` line on stderr")
        # Progress lines before the error are fine; a second error format (click's own, a logger's) is not.
        strays = [line for line in lines if line.lower().startswith(("error", "usage:"))]
        if not is_help and strays:
            problems.append(f"stderr mixes another error format: {strays[:2]}")
        if outcome.changed and not may_write:
            problems.append(f"failed but changed files: {outcome.changed}")
    return problems


def fresh_dirs(base: Path) -> dict[str, Path]:
    """A copy of the seeded home for one invocation."""
    if base.exists():
        shutil.rmtree(base)
    return seed_home(base)
