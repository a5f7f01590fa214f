"""Running the real `c3` console script against hostile files and file systems, and judging it.

Every run is a real subprocess with a deadline and a memory cap (RLIMIT_AS), so a hang, a blow-up or a
traceback is seen as the user would see it, and never takes the test machine down with it.
"""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

C3 = str(Path(sys.executable).with_name("c3"))
DEADLINE_S = 5.0
AT_ONCE_S = 10.0
"""A refusal "at once", judged on a busy 2-core box where c3's own start alone takes up to ~3 s of wall
time: what it rules out (a bomb expanded, a special file read to the end) takes minutes or never ends."""
MEMORY_BYTES = 500 * 1024 * 1024
EXIT_CODES = {0, 1, 2, 3}

BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def bomb_estate() -> str:
    """The billion-laughs bomb inside an estate entry, where `pod list` used to repr() it."""
    return BOMB.replace("a: &a", "x-a: &a") + "schema_version: 1\nestate:\n  - name: chat\n    slug: *i\n    gpus: [0]\n    port: 8000\n"


@dataclass
class Run:
    argv: list[str]
    rc: int
    out: str
    err: str
    seconds: float
    timed_out: bool = False

    def error_line(self) -> str:
        """The one `c3: error:` line (an optional `hint:` after it); fails on anything else."""
        lines = self.err.strip().splitlines()
        assert "Traceback" not in self.err, self.err[-2000:]
        assert lines and lines[0].startswith("c3: error: "), (self.argv, self.rc, self.err[-2000:])
        assert len(lines) <= 2 and all(line.startswith("hint: ") for line in lines[1:]), self.err[-2000:]
        return lines[0]


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES + 256 * 1024 * 1024, MEMORY_BYTES + 256 * 1024 * 1024))
    os.setsid()


def run(*args: str, env: dict[str, str] | None = None, deadline: float = DEADLINE_S, stdin: str | None = None) -> Run:
    """`c3 ARGS` with the test's C3_HOME/C3_STATE (plus `env`), a deadline and an address-space cap.

    The cap is the budget plus the interpreter's own virtual reservations (threads' stacks, arenas);
    a MemoryError under it is a failure like any other traceback.
    """
    full = dict(os.environ)
    full.update(env or {})
    full.setdefault("C3_RUNTIME", "sim")
    started = time.monotonic()
    proc = subprocess.Popen([C3, *args], env=full, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_limit_memory)
    try:
        out, err = proc.communicate(stdin, timeout=deadline * 3)  # generous margin on a loaded machine; judged below
        timed_out = False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        timed_out = True
    return Run([*args], proc.returncode, out, err, time.monotonic() - started, timed_out)


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every regular file under `folder` (lock sentinels excluded) → its bytes: a partial write shows."""
    found: dict[str, bytes | str] = {}
    if not folder.is_dir():
        return found
    for path in sorted(folder.rglob("*")):
        if path.name.endswith(".lock") and path.name.startswith("."):
            continue
        rel = str(path.relative_to(folder))
        if path.is_symlink():
            found[rel] = "link->" + os.readlink(path)
        elif path.is_file():
            with contextlib.suppress(OSError):
                found[rel] = path.read_bytes()
        elif path.is_dir():
            found[rel] = "dir"
        else:
            found[rel] = "special"
    return found


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str = "64k", *, require: Callable[[str, bool, str], None], readonly: bool = False) -> Iterator[Path]:
    """A tmpfs mounted at `where` for the test (root only); unmounted afterwards whatever happens.
    `require` is the `require_service` fixture: a machine that cannot mount one skips the test, or
    fails it under --require-services (CI runs as root, where mounting a tmpfs works)."""
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)], capture_output=True, text=True)
    require("tmpfs mount (root)", done.returncode == 0, f"cannot mount a tmpfs here: {' '.join(done.stderr.split())}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def remount_readonly(where: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True, capture_output=True)


def fill(where: Path) -> None:
    """Fill a small file system to the last byte."""
    with contextlib.suppress(OSError), open(where / ".filler", "wb") as fh:
        while True:
            fh.write(b"\0" * 4096)
            fh.flush()
