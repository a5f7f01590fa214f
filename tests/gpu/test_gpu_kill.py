"""`c3 gpus kill PID`: a real signal to a real process the test started, which the fake NVML under the
real pynvml lists on a GPU — by pid only, a foreign process only with --foreign, and one error line
(exit 1) for a pid that has exited, is on no GPU, or that the user may not signal."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

C3_BIN = Path(sys.executable).with_name("c3")


@pytest.fixture
def rig(fake_nvml, tmp_path):
    from scripts.rig.fake_nvml import FakeGpu

    fake_nvml.set_gpus([FakeGpu(name="NVIDIA GeForce RTX 3090", total_mib=24576, sm="8.6", reserved_mib=422),
                        FakeGpu(name="NVIDIA GeForce RTX 3090", total_mib=24576, sm="8.6", reserved_mib=422)])
    env = {k: v for k, v in fake_nvml.env().items() if k != "C3_RIG"}
    env.update(C3_HOME=str(tmp_path / "home"), C3_STATE=str(tmp_path / "state"))
    started: list[subprocess.Popen] = []

    def job(gpu: int, mib: int = 2048) -> subprocess.Popen:
        proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
        started.append(proc)
        fake_nvml.add_process(gpu, proc.pid, used_mib=mib, name="sleep")
        return proc

    def c3(*args: str, user_env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
        return subprocess.run([*prefix, str(C3_BIN), *args], capture_output=True, text=True, env=user_env or env, timeout=120)

    yield fake_nvml, job, c3
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def one_error(done: subprocess.CompletedProcess) -> str:
    lines = done.stderr.strip().splitlines()
    assert lines and lines[0].startswith("c3: error: ") and "Traceback" not in done.stderr, done.stderr
    assert len([line for line in lines if line.startswith("c3: error:")]) == 1, done.stderr
    return lines[0]


def test_a_foreign_process_needs_foreign_and_then_gets_sigterm(rig):
    _fake, job, c3 = rig
    stranger = job(1)
    refused = c3("gpus", "kill", str(stranger.pid))
    assert refused.returncode == 1 and "is no c3 pod's process (foreign" in one_error(refused) and "--foreign" in refused.stderr
    assert stranger.poll() is None, "refused, yet signalled"
    dry = c3("gpus", "kill", str(stranger.pid), "--foreign", "--dry-run")
    assert dry.returncode == 0 and "dry run: nothing sent" in dry.stdout and "GPU: 1 (2,048 MiB)" in dry.stdout and "sleep 600" in dry.stdout, dry
    assert "owner: foreign" in dry.stdout
    assert stranger.poll() is None, "a dry run signalled"
    done = c3("gpus", "kill", str(stranger.pid), "--foreign", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["pid"], result["signal"], result["gpus"], result["pod"], result["foreign"], result["exited"]) == (stranger.pid, "TERM", [1], None, True, True)
    assert stranger.wait(timeout=10) == -signal.SIGTERM


def test_signal_kill_and_the_text_result(rig):
    _fake, job, c3 = rig
    stranger = job(0)
    done = c3("gpus", "kill", str(stranger.pid), "--signal", "kill", "--foreign")
    assert done.returncode == 0, done.stderr
    assert f"✓ sent SIGKILL to pid {stranger.pid} (foreign, GPU 0): it exited" in done.stdout
    assert stranger.wait(timeout=10) == -signal.SIGKILL


def test_a_pid_that_has_exited_or_is_on_no_gpu_is_one_error_line(rig):
    _fake, job, c3 = rig
    gone = job(0)
    gone.kill()
    gone.wait(timeout=10)  # NVML still lists it (the fake's list is fixed): the pid is dead all the same
    done = c3("gpus", "kill", str(gone.pid), "--foreign")
    assert done.returncode == 1 and f"pid {gone.pid} has exited" in one_error(done)
    bystander = subprocess.Popen(["sleep", "600"], start_new_session=True)  # alive, on no GPU
    try:
        done = c3("gpus", "kill", str(bystander.pid), "--foreign")
        assert done.returncode == 1 and f"pid {bystander.pid} is on no GPU" in one_error(done)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait(timeout=10)
    bad = c3("gpus", "kill", "12", "--signal", "STOP")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and bad.stderr.startswith("c3: error:")


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to run c3 as another user")
def test_a_process_the_user_may_not_signal(fake_nvml_library, tmp_path):
    """c3 run as `nobody` against the test's (root's) process: EPERM is one line, exit 1, nothing sent."""
    from scripts.rig.fake_nvml import FakeGpu, FakeNvml

    shared = Path(tempfile.mkdtemp(prefix="c3-kill-"))  # readable by nobody (pytest's own tmp is 0700)
    try:
        shared.chmod(0o777)
        fake = FakeNvml(fake_nvml_library, shared / "nvml")
        fake.set_gpus([FakeGpu(name="NVIDIA GeForce RTX 3090", total_mib=24576, sm="8.6", reserved_mib=422)])
        for path in (shared / "nvml", *(shared / "nvml").rglob("*")):
            path.chmod(0o777 if path.is_dir() else 0o666)
        proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
        try:
            fake.add_process(0, proc.pid, used_mib=1024, name="sleep")
            (shared / "nvml" / "nvml-state").chmod(0o666)
            env = {k: v for k, v in fake.env().items() if k != "C3_RIG"}
            env.update(C3_HOME=str(shared / "home"), C3_STATE=str(shared / "state"), HOME=str(shared))
            done = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", str(C3_BIN), "gpus", "kill", str(proc.pid), "--foreign"],
                                  capture_output=True, text=True, env=env, timeout=120)
            assert done.returncode == 1 and f"not permitted to signal pid {proc.pid} (root's process)" in one_error(done), done.stderr
            assert proc.poll() is None
        finally:
            proc.kill()
            proc.wait(timeout=10)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_a_pid_reused_after_the_plan_is_refused_not_signalled(rig, tmp_path, monkeypatch):
    """The gate showed one process; if its pid now names another (the kernel reuses pids), nothing is sent."""
    from backend.actions.inputs import ProcessSignal
    from backend.actions.signal_process import SignalProcess
    from backend.actions.workspace import Workspace
    from backend.errors import Refused
    from backend.runtime import gpu_processes

    _fake, job, _c3 = rig
    monkeypatch.delenv("C3_RIG", raising=False)
    target = job(0)
    action = SignalProcess(Workspace(tmp_path / "estate.yml"), ProcessSignal(target.pid, "KILL", foreign=True))
    assert "owner: foreign" in "\n".join(action.plan().lines) and action.problems() == []
    started = gpu_processes.proc_start(target.pid)
    monkeypatch.setattr(gpu_processes, "proc_start", lambda pid, proc=gpu_processes.PROC: started + 1)  # another process, same pid
    assert [p.message for p in action.problems()] == [f"pid {target.pid} is now another process than the one shown"]
    with pytest.raises(Refused, match="now another process"):
        action.run(lambda step: None)
    assert target.poll() is None
