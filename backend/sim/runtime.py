"""The simulated runtime: each pod is the stub engine (backend/sim/stub_engine.py) as a local process.

For `c3 demo` and tests: the whole pod life cycle (up, status, placement, logs, down) with no GPU and
no Docker. The process gets its GPUs the way a container in `env` mode would (NVIDIA_VISIBLE_DEVICES)
and registers them in the GPU registration directory, which the simulated probe reads — so placement
is judged by the same code as for containers. State lives under `$C3_STATE/sim/`: one JSON record per
pod (pid + start time, so a recycled pid is never mistaken for the pod) and one log file per pod.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from backend.atomic import locked
from backend.errors import Refused
from backend.paths import state_home
from backend.runtime import cgroup
from backend.runtime.gpu_mode import ModeDecision, binding
from backend.runtime.models import ExecResult, LaunchSpec, ResourceUse, Workload
from backend.runtime.placement import attribute
from backend.settings import current as current_settings
from backend.sim import sandbox
from backend.userfiles import read_json, read_tail

ROOT = Path(__file__).resolve().parents[2]


def sim_dir() -> Path:
    """`$C3_STATE/sim`."""
    return state_home() / "sim"


def registry_dir() -> Path:
    """Where stub engines register their GPUs (shared with the simulated probe)."""
    from backend.gpu.registry import default_registry_dir

    return default_registry_dir()


def _state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[0] if fields else None


def _cpu_ticks(pid: int) -> int | None:
    """utime + stime of the process (fields 14 and 15 of /proc/PID/stat, in clock ticks)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
        fields = stat.rsplit(")", 1)[-1].split()  # the command name may hold spaces and ')'
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def _rss_bytes(pid: int) -> int | None:
    """The process's resident memory (VmRSS of /proc/PID/status)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        return None
    return None


class SimRuntime:
    """PodRuntime whose workloads are stub-engine processes on this machine."""

    kind = "sim"

    def __init__(self, base: Path | None = None, python: str = sys.executable) -> None:
        self.base = base or sim_dir()
        self.python = python
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()

    # -- files ---------------------------------------------------------------------------------

    def _record_path(self, pod: str) -> Path:
        return self.base / "pods" / f"{pod}.json"

    def log_path(self, pod: str) -> Path:
        return self.base / "logs" / f"{pod}.log"

    def _record(self, pod: str) -> dict[str, Any] | None:
        # A record that is not a regular file, oversized or not JSON is one usage error (not "no
        # pod"): a launch would write through a link to /dev/zero, and a FIFO would hang the read.
        data = read_json(self._record_path(pod), what="simulator record", missing_ok=True)
        return data if isinstance(data, dict) and isinstance(data.get("pid"), int) else None

    def _alive(self, record: dict[str, Any]) -> bool:
        pid = record["pid"]
        child = self._children.get(pid)
        if child is not None and child.poll() is not None:
            return False
        state = _state(pid)
        if state is None or state in {"Z", "X"}:
            return False
        return cgroup.start_time(pid) == record.get("start_time")

    # -- PodRuntime ----------------------------------------------------------------------------

    def gpu_mode(self, forced: str | None = None) -> ModeDecision:
        # A local process cannot be handed devices; the mask is all there is (and all the stub reads).
        return ModeDecision("env", "simulated runtime")

    def launch(self, spec: LaunchSpec, secret_env: Mapping[str, str]) -> Workload:
        # Two `c3 pod up` of one pod from two terminals: the file lock lets only one start it.
        with self._lock, locked(self._record_path(spec.pod)):
            current = self.workload(spec.pod)
            if current.running:
                raise Refused(f"pod {spec.pod} is already running (pid {current.pids[0]})", hint=f"`c3 pod down {spec.pod}` first")
            for folder in ("pods", "logs"):
                (self.base / folder).mkdir(parents=True, exist_ok=True, mode=0o700)
            registry = registry_dir()
            registry.mkdir(parents=True, exist_ok=True)
            env = {
                **os.environ,
                **current_settings().child_env(),  # what `c3 demo` set without touching os.environ
                **spec.env,
                **binding("env", spec.gpu_uuids).env,
                **dict(secret_env),
                "C3_GPU_REGISTRY": str(registry),
                "PYTHONUNBUFFERED": "1",
            }
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
            argv = [self.python, "-m", "backend.sim.stub_engine", *_engine_args(spec)]
            log_fd = os.open(self.log_path(spec.pod), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                child = subprocess.Popen(
                    argv, env=env, stdin=subprocess.DEVNULL, stdout=log_fd, stderr=subprocess.STDOUT, start_new_session=True, cwd=str(ROOT)
                )
            finally:
                os.close(log_fd)
            self._children[child.pid] = child
            record = {
                "pid": child.pid,
                "start_time": cgroup.start_time(child.pid),
                "slug": spec.slug,
                "estate": spec.estate,
                "port": spec.host_port,
                "gpu_uuids": list(spec.gpu_uuids),
                "started": time.time(),
            }
            tmp = self._record_path(spec.pod).with_suffix(".tmp")
            tmp.write_text(json.dumps(record), encoding="utf-8")
            os.replace(tmp, self._record_path(spec.pod))
            return self._workload(spec.pod, record)

    def _workload(self, pod: str, record: dict[str, Any] | None) -> Workload:
        if record is None:
            return Workload(pod=pod, status="absent")
        alive = self._alive(record)
        child = self._children.get(record["pid"])
        return Workload(
            pod=pod,
            status="running" if alive else "exited",
            id=f"sim-{record['pid']}",
            slug=record.get("slug"),
            estate=record.get("estate"),
            host_port=record.get("port"),
            exit_code=(child.returncode if child is not None else None) if not alive else None,
            pids=(record["pid"],),
            gpu_uuids=tuple(record.get("gpu_uuids") or ()),
        )

    def workload(self, pod: str) -> Workload:
        return self._workload(pod, self._record(pod))

    def workloads(self) -> dict[str, Workload]:
        folder = self.base / "pods"
        try:
            names = sorted(p.stem for p in folder.iterdir() if p.suffix == ".json")
        except OSError:
            return {}
        return {name: self.workload(name) for name in names}

    def mark_healthy(self, pod: str) -> None:
        """Nothing restarts a local process; the simulator has no restart policy."""

    def stop(self, pod: str, timeout: float = 30.0) -> bool:
        record = self._record(pod)
        if record is None:
            return False
        pid = record["pid"]
        if self._alive(record):
            for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(pid, sig)  # its own session: the group is the stub and anything it spawned
                except ProcessLookupError:
                    break
                if self._wait_gone(record, wait):
                    break
        child = self._children.pop(pid, None)
        if child is not None:
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self._record_path(pod).unlink(missing_ok=True)
        return True

    def _wait_gone(self, record: dict[str, Any], wait: float) -> bool:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not self._alive(record):
                return True
            time.sleep(0.05)
        return not self._alive(record)

    def logs(self, pod: str, tail: int = 100, timestamps: bool = False) -> str:
        # A plain file of the process's output: there is no per-line receive time to give. Only its end
        # is read (the engine keeps appending), through the bounded reader: a FIFO there never blocks.
        found = read_tail(self.log_path(pod), what="simulated pod log")
        if found is None:
            return ""
        raw, cut = found
        lines = raw.decode("utf-8", errors="replace").splitlines()[1 if cut else 0:]  # a cut start is half a line
        if not tail:
            return ""
        return "\n".join(lines[-tail:]) + ("\n" if lines else "")

    def follow_logs(self, pod: str, tail: int = 100) -> Iterator[str]:
        yield from self.logs(pod, tail).splitlines()
        try:
            handle = self.log_path(pod).open("r", encoding="utf-8", errors="replace")
        except OSError:
            return
        with handle:
            handle.seek(0, os.SEEK_END)
            while True:
                line = handle.readline()
                if line:
                    yield line.rstrip("\n")
                    continue
                if not self.workload(pod).running:
                    return
                time.sleep(0.2)

    def exec_in(self, pod: str, argv: list[str], timeout: float) -> ExecResult:
        """The pod's "container" is its stub process: `argv` runs as a local process in the pod's sandbox
        (backend/sim/sandbox.py: its own working directory, the stub's environment, C3_POD and C3_SIMULATED)."""
        record = self._running_record(pod)
        return sandbox.run(self.base, pod, record["pid"], record.get("start_time"), argv, timeout)

    def shell_argv(self, pod: str) -> list[str]:
        """The command that opens an interactive shell in the pod's sandbox (the cockpit's shell key)."""
        record = self._running_record(pod)
        return sandbox.shell_argv(self.base, pod, record["pid"], record.get("start_time"))

    def _running_record(self, pod: str) -> dict[str, Any]:
        record = self._record(pod)
        if record is None or not self._alive(record):
            raise Refused(f"pod {pod} is not running ({'stopped' if record is None else 'exited'})", hint=f"`c3 pod up {pod}` first")
        return record

    def usage(self, pods: Iterable[str], interval: float = 0.5) -> dict[str, ResourceUse]:
        """The stub process's own CPU time and RSS from /proc, two samples `interval` s apart (all pods at
        once, so N pods cost one interval); a process that went away in between is left out."""
        records = {pod: r for pod in pods if (r := self._record(pod)) is not None and self._alive(r)}
        first = {pod: ticks for pod, r in records.items() if (ticks := _cpu_ticks(r["pid"])) is not None}
        if not first:
            return {}
        began = time.monotonic()
        time.sleep(interval)
        found: dict[str, ResourceUse] = {}
        for pod, ticks in first.items():
            record = records[pod]
            later, rss = _cpu_ticks(record["pid"]), _rss_bytes(record["pid"])
            if later is None or rss is None or not self._alive(record):
                continue
            cpu = (later - ticks) / os.sysconf("SC_CLK_TCK") / max(time.monotonic() - began, 1e-3) * 100
            found[pod] = ResourceUse(cpu_pct=round(cpu, 1), mem_bytes=rss)
        return found

    def owners(self, pids: Iterable[int]) -> dict[int, str | None]:
        by_pid = {w.pids[0]: w.pod for w in self.workloads().values() if w.running and w.pids}
        return attribute(pids, by_pid.get, cgroup.parent_pid)


def _engine_args(spec: LaunchSpec) -> list[str]:
    """The pod's engine argv, with the port moved to the host port (a local process has no port mapping)."""
    argv = list(spec.argv)
    for flag in ("--port",):
        while flag in argv:
            i = argv.index(flag)
            del argv[i : i + 2]
    return [*argv, "--host", "127.0.0.1", "--port", str(spec.host_port), "--name", spec.pod]
