"""Who holds each GPU: every compute process NVML lists (the sim probe: the registry its stub engines
write), mapped to the c3 pod whose container it runs in, with its user and command line.

A process is `foreign` when it belongs to no c3 pod (someone else's job, a desktop, a leftover), and
`misplaced` when it belongs to a pod that did not ask for that GPU: the row names the GPU the process
really uses, so a pod that landed on the wrong GPU shows there, not on the GPU it planned.

User and command come from the host's /proc (NVML pids are host pids); a process that has gone, or
one in a pid namespace this host cannot see, gets None rather than a guess. Credentials in a command
line (`--api-key X`, an `hf_…` token) are replaced by `***` before anything shows them.
"""

from __future__ import annotations

import pwd
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from backend.models import GpuSnapshot, Pod
from backend.models.gpu import GpuProcessRow
from backend.secrets_env import SECRET_VALUE

__all__ = ["GpuProcessRow", "proc_identity", "proc_start", "process_rows", "redact_argv"]

PROC = Path("/proc")
CMDLINE_MAX = 4096
"""Bytes of /proc/PID/cmdline read at most (a command line can be megabytes)."""
HIDDEN = "***"
SECRET_FLAG = re.compile(r"^--?[\w.-]*?(key|token|secret|passw(?:or)?d|auth|credentials?|cookie)$", re.IGNORECASE)
"""A flag whose value is a credential (`--api-key`, `--hf-token`, `--password`); not `--max-num-batched-tokens`."""


def redact_argv(args: list[str]) -> str:
    """A command line to show: the value of a credential flag (`--api-key X`, `--api-key=X`) and any
    argument that looks like a credential (`hf_…`, `sk-…`, a URL with a password) become `***`."""
    out: list[str] = []
    hide_next = False
    for arg in args:
        flag, eq, _value = arg.partition("=")
        if hide_next and not arg.startswith("-"):
            out.append(HIDDEN)
        elif SECRET_FLAG.match(flag) and eq:
            out.append(f"{flag}={HIDDEN}")
        elif SECRET_VALUE.search(arg):
            out.append(HIDDEN)
        else:
            out.append(arg)
        hide_next = bool(SECRET_FLAG.match(arg))
    return " ".join(out)


def proc_identity(pid: int, proc: Path = PROC) -> tuple[str | None, str | None]:
    """(user, command line) of a host pid from /proc; (None, None) when it is gone or hidden."""
    base = proc / str(pid)
    try:
        with (base / "cmdline").open("rb") as handle:
            raw = handle.read(CMDLINE_MAX)
        uid = next((int(line.split()[1]) for line in (base / "status").read_text(errors="replace").splitlines() if line.startswith("Uid:")), None)
    except (OSError, ValueError, IndexError):
        return None, None
    args = raw.rstrip(b"\0").decode("utf-8", "replace").split("\0")
    command = redact_argv(args) if any(args) else None
    user: str | None = None
    if uid is not None:
        try:
            user = pwd.getpwuid(uid).pw_name
        except KeyError:
            user = str(uid)
    return user, command


def proc_start(pid: int, proc: Path = PROC) -> int | None:
    """When a host pid's process started (clock ticks since boot, /proc/PID/stat field 22), or None when
    it has gone or is a zombie: with the pid, who a process is — a pid reused by a new process differs."""
    try:
        raw = (proc / str(pid) / "stat").read_bytes()[:4096]
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself hold ")" or spaces: split after the last.
    fields = raw[raw.rfind(b")") + 2:].split()
    if len(fields) < 20 or fields[0] == b"Z" or not fields[19].isdigit():
        return None
    return int(fields[19])


def process_rows(
    snapshots: Sequence[GpuSnapshot],
    pods: Iterable[Pod],
    owners: Callable[[Iterable[int]], dict[int, str | None]],
    *,
    identity: Callable[[int], tuple[str | None, str | None]] = proc_identity,
) -> list[GpuProcessRow]:
    """Every compute process of these readings, GPU index then pid order. `owners` is the runtime's
    pid → pod mapping (docker: the container's cgroup; sim: the stub's registration)."""
    procs = [(snap.gpu.index, proc) for snap in snapshots for proc in snap.processes]
    if not procs:
        return []
    owner_of = owners(sorted({p.pid for _, p in procs}))
    plans = {pod.name: tuple(pod.gpus) for pod in pods}
    rows = []
    for index, proc in procs:
        pod = owner_of.get(proc.pid)
        user, command = identity(proc.pid)
        rows.append(GpuProcessRow(pid=proc.pid, gpu_index=index, gpu_uuid=proc.gpu_uuid, used_mib=proc.used_mib, pod=pod,
                                  planned_gpus=plans.get(pod) if pod else None, user=user, command=command))
    rows.sort(key=lambda r: (r.gpu_index, r.pid))
    return rows
