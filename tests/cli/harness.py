"""Run `c3` as a real subprocess in a throw-away C3_HOME/C3_STATE and judge what it did.

The contract every command keeps (issue 2): bad input ends in one `c3: error: …` line (plus an
optional `hint: …`), exit 0/1/2/3, nothing written on failure, never a traceback. This module
discovers the command tree from click, seeds a realistic home (an estate, two local nodes, a user
catalog entry) and runs invocations with a deadline, killing the whole process group on timeout.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import click

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


def run_c3(argv: list[str], dirs: dict[str, Path], *, env: dict[str, str] | None = None, timeout: float = 30.0) -> Outcome:
    """Run `c3 ARGV` with stdin closed; kill its process group at the deadline."""
    env = env if env is not None else base_env(dirs)
    watched = {"C3_HOME": dirs["home"], "files": dirs["files"]}  # files: what --file/--config point at

    def snapshot() -> dict[str, str]:
        return {f"{label}/{rel}": value for label, folder in watched.items() for rel, value in digest(folder).items()}

    before = snapshot()
    proc = subprocess.Popen([C3, *argv], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=str(dirs["files"]), start_new_session=True, text=True, errors="replace")
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    after = snapshot()
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    return Outcome(argv=argv, rc=proc.returncode, stdout=out, stderr=err, timed_out=timed_out, changed=changed)


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
