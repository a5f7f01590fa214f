"""The world `c3 demo` runs in: the real cockpit on the built-in simulated rig with the simulated runtime.

The demo keeps its own files (`$C3_STATE/demo/`), so it never touches the user's estate, and adds
one demo-only catalog entry whose engine ignores its GPU mask — booting it shows a placement
mismatch explained. Demo pods are local stub-engine processes; they are stopped when the last demo
exits. Two `c3 demo` share one estate (the same user's demo folder), so each running demo holds a
lease (`demo/leases/`); quitting one leaves the pods to the others.

Front ends reach this through `backend.actions.session` (`enter_demo`, `join_demo`), never directly.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from backend import paths, settings
from backend.atomic import locked

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

    try:
        data = json.loads(lease.read_text(encoding="utf-8"))
        pid, started = int(data["pid"]), data.get("start_time")
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return cgroup.start_time(pid) == started and started is not None


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
