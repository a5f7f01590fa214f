"""The world `c3 demo` runs in: the real cockpit on the built-in simulated rig with the simulated runtime.

The demo keeps its own files (`$C3_STATE/demo/`), so it never touches the user's estate, and adds
one demo-only catalog entry whose engine ignores its GPU mask — booting it shows a placement
mismatch explained. Demo pods are local stub-engine processes; they are stopped when the last demo
exits. Two `c3 demo` share one estate (the same user's demo folder), so each running demo holds a
lease (`demo/leases/`); quitting one leaves the pods to the others.

The first demo also starts the demo's gateway: a real `c3 gateway serve` over the demo's estate on
127.0.0.1:8012 (`demo/gateway.json` names its pid), so a request for a demo pod by name boots it on demand
as it would on a rig. It stops with the pods, when the last demo leaves.

Front ends reach this through `backend.actions.session` (`enter_demo`, `join_demo`), never directly.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from backend import paths, settings
from backend.atomic import locked
from backend.errors import C3Error
from backend.userfiles import read_json

DEMO_CATALOG = """\
# Written by `c3 demo`: an engine that ignores NVIDIA_VISIBLE_DEVICES and lands on GPU 0,
# so the cockpit can show what a placement mismatch looks like.
entries:
  - slug: custom/demo-misplaced
    engine: custom
    image: c3/stub-engine:demo
    command: ["stub-engine", "--model", "demo/misplaced"]
    container_port: 8000
    health_path: /v1/models
    tp: 1
    default_port: 8900
    status: production
    status_note: demo only — lands on GPU 0 whatever it asks for
    env:
      C3_STUB_GPUS: "0"
"""


def demo_dirs() -> tuple[Path, Path]:
    """(home, state) of the demo, under the user's state folder."""
    base = paths.state_home() / "demo"
    return base / "home", base / "state"


def demo_settings(startup_delay_s: float = 3.0) -> settings.Settings:
    """The demo's settings (its own C3_HOME/C3_STATE, the built-in rig, the simulated runtime), with
    its folders and catalog entry written. The process environment is left as it is: what the stub
    engines need reaches them through `Settings.child_env`."""
    now = settings.current()
    if now.demo:
        return now  # already inside a demo (a process the demo started)
    home, state = demo_dirs()
    (home / "catalog.d").mkdir(parents=True, exist_ok=True)
    state.mkdir(parents=True, exist_ok=True)
    (home / "catalog.d" / "demo.yaml").write_text(DEMO_CATALOG, encoding="utf-8")
    # Stub engines take a few seconds to "load", so the boot progress is visible.
    delay = now.stub_startup_delay if now.stub_startup_delay is not None else startup_delay_s
    return now.model_copy(update={"home": home, "state": state, "rig": "demo", "runtime": "sim", "demo": True, "stub_startup_delay": delay})


def stop_demo_pods() -> list[str]:
    """Stop every simulated pod the demo started (they are local processes of this user)."""
    from backend.sim.runtime import SimRuntime

    runtime = SimRuntime()
    stopped = []
    for name, workload in runtime.workloads().items():
        if workload.status != "absent" and runtime.stop(name, timeout=5.0):
            stopped.append(name)
    return stopped


def _leases() -> Path:
    return paths.state_home() / "demo" / "leases"


def _alive(lease: Path) -> bool:
    """The lease's process still runs (the same process: pid and start time, so a reused pid is not it)."""
    from backend.runtime import cgroup

    data = _read_record(lease)
    try:
        pid, started = int(data["pid"]), data.get("start_time")
    except (ValueError, KeyError, TypeError):
        return False
    return cgroup.start_time(pid) == started and started is not None


def _read_record(path: Path) -> dict[str, Any]:
    """A lease or the gateway's record through the bounded reader; empty when missing or spoiled (a FIFO,
    a device, a huge or malformed file: then no live demo holds it, and it is cleared as a dead one's)."""
    try:
        data = read_json(path, what="demo record", missing_ok=True)
    except C3Error:
        return {}
    return data if isinstance(data, dict) else {}


def join_demo() -> Path:
    """Hold a lease on the demo's pods for this cockpit (released by `leave_demo`)."""
    from backend.runtime import cgroup

    folder = _leases()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    lease = folder / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
    with locked(folder / "all"):
        lease.write_text(json.dumps({"pid": os.getpid(), "start_time": cgroup.start_time(os.getpid())}), encoding="utf-8")
    return lease


def leave_demo(lease: Path | None) -> bool:
    """Give the lease back; True when no other live demo holds one (then the caller stops the pods).
    Leases of demos that died without leaving are cleared on the way."""
    folder = _leases()
    with locked(folder / "all"):
        if lease is not None:
            lease.unlink(missing_ok=True)
        others = False
        for other in folder.glob("*.json") if folder.is_dir() else ():
            if _alive(other):
                others = True
            else:
                other.unlink(missing_ok=True)
        return not others


GATEWAY_PORT = 8012
"""The demo gateway's port on loopback: `c3 gateway serve`'s own default."""
GATEWAY_IDLE_TTL_S = 600
"""A pod the demo's gateway booted and nobody used for ten minutes is stopped again."""
_spawned: dict[int, subprocess.Popen[bytes]] = {}
"""Gateways this process started, by pid: waited for when stopped, so none is left a zombie that looks alive."""


def _gateway_record() -> Path:
    return _leases().parent / "gateway.json"


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def start_gateway(port: int = GATEWAY_PORT) -> str:
    """Start the demo's gateway on 127.0.0.1:`port` unless another demo's already runs; one line saying
    where it answers, or why the demo runs without one (the port is taken)."""
    from backend.runtime import cgroup

    record = _gateway_record()
    record.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _leases().mkdir(parents=True, exist_ok=True, mode=0o700)
    with locked(_leases() / "all"):
        if _alive(record):
            running = _read_record(record).get("port")
            return f"The demo's gateway answers on http://127.0.0.1:{running} (one model name per pod; a stopped pod boots on demand)"
        if not _port_free(port):
            return f"Port {port} is taken: this demo runs without its gateway (c3 demo --gateway-port N picks another)"
        env = settings.child_process_env()
        argv = [sys.executable, "-m", "c3", "gateway", "serve", "--bind", f"127.0.0.1:{port}", "--idle-ttl", str(GATEWAY_IDLE_TTL_S)]
        with (record.parent / "gateway.log").open("ab") as log:
            proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        _spawned[proc.pid] = proc
        record.write_text(json.dumps({"pid": proc.pid, "start_time": cgroup.start_time(proc.pid), "port": port}), encoding="utf-8")
    return f"The demo's gateway answers on http://127.0.0.1:{port} (one model name per pod; a stopped pod boots on demand)"


def stop_gateway(timeout_s: float = 5.0) -> bool:
    """Stop the demo's gateway (SIGTERM, then SIGKILL past `timeout_s`), only the process its record names
    (same pid and start time); True when one was stopped."""
    record = _gateway_record()
    if not _alive(record):
        record.unlink(missing_ok=True)
        return False
    pid = int(_read_record(record)["pid"])
    proc = _spawned.pop(pid, None)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None or proc is None and not _alive(record):
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        if proc is not None:
            proc.wait(timeout=timeout_s)
    record.unlink(missing_ok=True)
    return True
