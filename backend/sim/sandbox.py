"""A simulated pod's sandbox: what `c3 pod exec` and the cockpit's shell key enter on the simulated rig.

A Docker pod's command runs in its container: its own working directory, the environment c3 started the
engine with, its own processes. A simulated pod's "container" is its stub-engine process, so the nearest
thing is a local process with a working directory of its own (`$C3_STATE/sim/sandbox/POD`), the
environment the stub was started with (read back from `/proc/PID/environ`, as `docker exec` inherits the
container's: the GPU mask, the secrets c3 handed it) and `C3_POD=POD`, `C3_SIMULATED=1` and a prompt that
say where it runs — no isolation beyond that (the simulator isolates nothing). The command runs in a
session of its own, so a timeout stops it and all it started (Docker cannot; a local process can).

`python -m backend.sim.sandbox STATE POD PID START` is the interactive shell the cockpit hands the terminal
to: its argv carries no secret (they are read from /proc by the shell's own process).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

from backend.errors import Refused
from backend.runtime import cgroup
from backend.runtime.models import MAX_EXEC_OUTPUT, ExecResult

ENVIRON_MAX = 1 << 20
"""The most of /proc/PID/environ read (the kernel caps a process's environment near 2 MiB; 1 MiB is far
more than any engine is started with)."""


def sandbox_dir(base: Path, pod: str) -> Path:
    """The pod's working directory, `STATE/sim/sandbox/POD` (made on first use, private)."""
    folder = base / "sandbox" / pod
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


def environment(pod: str, pid: int, start_time: int | None, folder: Path) -> dict[str, str]:
    """The stub's environment as it was started, plus the markers. Refused once that process is gone (or
    its pid now names another process: the start time tells)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            raw = handle.read(ENVIRON_MAX)
    except OSError:
        raw = None
    if raw is None or cgroup.start_time(pid) != start_time:
        raise Refused(f"pod {pod} is not running (its engine process {pid} is gone)", hint=f"`c3 pod up {pod}` first")
    found: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            found[key.decode(errors="replace")] = value.decode(errors="replace")
    return {**found, "C3_POD": pod, "C3_SIMULATED": "1", "PWD": str(folder), "PS1": f"[c3 simulated pod {pod}] \\w \\$ "}


def run(base: Path, pod: str, pid: int, start_time: int | None, argv: list[str], timeout: float) -> ExecResult:
    """`argv` in the pod's sandbox, no terminal, stdout and stderr together (the first `MAX_EXEC_OUTPUT`
    bytes kept, the rest read and dropped so the command never blocks on a full pipe). A command that cannot
    be started is exit 127 (not found) or 126 (not executable) with the reason as its output, as a shell
    and `docker exec` report it; one still running after `timeout` s is stopped with everything it started."""
    folder = sandbox_dir(base, pod)
    env = environment(pod, pid, start_time, folder)
    try:
        proc = subprocess.Popen(argv, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as error:
        code = 127 if isinstance(error, FileNotFoundError) else 126
        return ExecResult(exit_code=code, output=f"c3 simulated pod {pod}: {argv[0]}: {error.strerror or error}\n")
    kept = bytearray()
    seen = [0]

    def drain() -> None:
        assert proc.stdout is not None
        while chunk := os.read(proc.stdout.fileno(), 65536):  # what is there, without waiting for a full buffer
            seen[0] += len(chunk)
            if len(kept) <= MAX_EXEC_OUTPUT:
                kept.extend(chunk[: MAX_EXEC_OUTPUT + 1 - len(kept)])

    reader = threading.Thread(target=drain, name=f"exec-{pod}", daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        _stop_group(proc)
        raise Refused(f"the command did not finish within {timeout:g} s in pod {pod} (stopped it)",
                      hint="give it a larger timeout, or run a command that ends") from None
    reader.join(2.0)
    if reader.is_alive():  # the command exited but something it started holds the output open
        _stop_group(proc)
        reader.join(2.0)
    assert proc.stdout is not None
    proc.stdout.close()
    return ExecResult(exit_code=code, output=bytes(kept[:MAX_EXEC_OUTPUT]).decode("utf-8", errors="replace"),
                      truncated=seen[0] > MAX_EXEC_OUTPUT)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(5.0)
    except subprocess.TimeoutExpired:
        pass


def shell_argv(base: Path, pod: str, pid: int, start_time: int | None) -> list[str]:
    """The command that opens an interactive shell in the pod's sandbox (this module run by c3's own Python)."""
    return [sys.executable, "-m", "backend.sim.sandbox", str(base), pod, str(pid), str(start_time)]


def main(args: list[str]) -> int:
    """Replace this process with an interactive shell in the pod's sandbox: bash without the user's rc files
    (they would set their own prompt over the marker) where there is bash, else sh. The terminal's TERM is
    kept, as `docker exec -it` sets one."""
    base, pod, pid, start = args
    folder = sandbox_dir(Path(base), pod)
    try:
        env = environment(pod, int(pid), None if start == "None" else int(start), folder)
    except Refused as error:
        print(f"c3: error: {error.message}", file=sys.stderr)
        return 1
    if "TERM" in os.environ:
        env["TERM"] = os.environ["TERM"]
    os.chdir(folder)
    shell = ["bash", "--norc", "--noprofile", "-i"] if shutil.which("bash", path=env.get("PATH")) else ["sh", "-i"]
    os.execvpe(shell[0], shell, env)
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
