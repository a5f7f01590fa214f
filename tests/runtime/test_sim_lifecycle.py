"""The whole pod life cycle on the simulated runtime (stub engine as local processes, no GPU, no Docker)."""

from __future__ import annotations

import json
import os
import re
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.runtime.helpers import ROOT, c3, c3_json, free_port, one_error_line, stub_entry, wait_until, write_catalog


@pytest.fixture
def sim(monkeypatch, tmp_path):
    """A simulated 4-GPU rig; every pod started here is stopped afterwards (by the CLI, by name)."""
    rig = tmp_path / "rig.yaml"
    rig.write_text(yaml.safe_dump({"gpus": [
        {"name": "NVIDIA GeForce RTX 3090", "total_mib": 24576, "sm": "8.6"},
        {"name": "NVIDIA GeForce RTX 3090", "total_mib": 24576, "sm": "8.6"},
        {"name": "NVIDIA GeForce RTX 3090", "total_mib": 24576, "sm": "8.6"},
        {"name": "NVIDIA GeForce RTX 3090", "total_mib": 24576, "sm": "8.6", "used_mib": 9000},
    ]}))
    monkeypatch.setenv("C3_RIG", str(rig))
    monkeypatch.delenv("C3_RUNTIME", raising=False)
    created: list[str] = []
    yield created
    for name in created:
        c3("pod", "down", name, "--timeout", "5")


def create(created, name, gpus, slug="custom/stub", port=None):
    port = port or free_port()
    result = c3("pod", "create", name, "--gpus", gpus, "--slug", slug, "--port", str(port), "--force")
    assert result.returncode == 0, result.stdout + result.stderr
    created.append(name)
    return port


def gpu_uuids():
    return [g["uuid"] for g in c3_json("gpus")["gpus"]]


def test_up_status_placement_logs_down(sim):
    write_catalog([stub_entry()])
    port = create(sim, "chat", "1")
    up = c3("pod", "up", "chat")
    assert up.returncode == 0, up.stdout + up.stderr
    assert f"serving on http://127.0.0.1:{port}" in up.stdout and "placement ok" in up.stdout
    status = c3_json("pod", "status")
    (row,) = status["pods"]
    uuids = gpu_uuids()
    assert row["running"] and row["serving"] and row["name"] == "chat" and row["gpus"] == [1]
    assert row["placement"]["verdict"] == "ok"
    assert row["placement"]["requested"] == [uuids[1]] and row["placement"]["actual"] == [uuids[1]]
    logs = c3("pod", "logs", "chat", "--tail", "50")
    assert logs.returncode == 0 and "Starting to load model" in logs.stdout
    boot_log = Path(os.environ["C3_STATE"]) / "boot" / "chat.log"
    assert "placement ok" in boot_log.read_text() and oct(boot_log.stat().st_mode & 0o777) == "0o600"
    rm = c3("pod", "rm", "chat")
    assert rm.returncode == 1 and "run" in one_error_line(rm.stderr)
    down = c3("pod", "down", "chat")
    assert down.returncode == 0 and "stopped" in down.stdout
    after = c3_json("pod", "status")["pods"][0]
    assert not after["running"] and after["placement"]["verdict"] == "unknown"


def test_gpus_that_did_not_arrive_are_a_mismatch(sim):
    uuids = gpu_uuids()
    # The stub registers on GPU 0 whatever mask it was given: a runtime that ignored the pinning.
    write_catalog([stub_entry(env={"C3_STUB_GPUS": uuids[0]})])
    create(sim, "stray", "2")
    up = c3("pod", "up", "stray")
    assert up.returncode == 1, up.stdout + up.stderr
    assert "not on exactly its GPUs" in one_error_line(up.stderr)
    place = c3_json("pod", "status")["pods"][0]["placement"]
    assert place["verdict"] == "mismatch" and place["missing"] == [uuids[2]] and place["extra"] == [uuids[0]]


def test_crash_during_boot_shows_last_log_lines(sim):
    write_catalog([stub_entry(env={"C3_STUB_CRASH_DURING_BOOT": "1"})])
    create(sim, "crashy", "0")
    up = c3("pod", "up", "crashy")
    assert up.returncode == 1
    line = one_error_line(up.stderr)
    assert "pod crashy failed to boot: the engine stopped during boot" in line
    assert "CUDA out of memory" in up.stderr  # the engine's last lines are shown


def test_gates_refuse_with_numbers_and_force_warns(sim, tmp_path):
    uuids = gpu_uuids()
    write_catalog([stub_entry(), stub_entry("vllm/stub-big", engine="vllm")])
    # VRAM: GPU 3 has 9000 MiB in use; vLLM at util 0.9 reserves ~21 GiB of its 24 GiB.
    create(sim, "big", "3", slug="vllm/stub-big")
    vram = c3("pod", "up", "big")
    assert vram.returncode == 1
    line = one_error_line(vram.stderr)
    assert "GPU 3 (NVIDIA GeForce RTX 3090) has" in line and "GiB free but vllm/stub-big reserves" in line and "short by" in line
    # Port: something else listens on the pod's port.
    port = create(sim, "porty", "0")
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", port))
        sock.listen()
        refused = c3("pod", "up", "porty")
        assert refused.returncode == 1 and f"port {port} is already in use" in one_error_line(refused.stderr)
    # A stranger process on the pod's GPU.
    registry = Path(os.environ["C3_STATE"]) / "sim" / "gpu-registry"
    registry.mkdir(parents=True, exist_ok=True)
    stranger_port = free_port()
    env = dict(os.environ, C3_GPU_REGISTRY=str(registry), NVIDIA_VISIBLE_DEVICES=uuids[1], C3_STUB_MEM_MIB="700", PYTHONPATH=str(ROOT))
    stranger = subprocess.Popen([sys.executable, "-m", "backend.sim.stub_engine", "--host", "127.0.0.1", "--port", str(stranger_port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: any(p.name.endswith(f"-{stranger.pid}.gpu") for p in registry.iterdir()))
        create(sim, "shared", "1")
        held = c3("pod", "up", "shared")
        assert held.returncode == 1
        assert f"GPU 1 held by pid {stranger.pid} (a process c3 did not start, 700 MiB)" in one_error_line(held.stderr)
        forced = c3("pod", "up", "shared", "--force")
        assert forced.returncode == 0, forced.stdout + forced.stderr
        assert "--force passes the gpus gate" in forced.stdout
        assert f"pid {stranger.pid} on GPU 1 (not a c3 pod)" in forced.stdout
        place = c3_json("pod", "status")["pods"]
        shared = next(p for p in place if p["name"] == "shared")["placement"]
        assert shared["verdict"] == "ok" and [f["pid"] for f in shared["foreign"]] == [stranger.pid]
    finally:
        stranger.terminate()
        stranger.wait(timeout=20)


def test_parallel_boot_takes_about_as_long_as_the_slowest(sim):
    write_catalog([stub_entry(command=["python3", "stub", "--startup-delay", "3", "--port", "8000"])])
    for i in range(4):
        create(sim, f"p{i}", str(i))
    up = c3("up", "--parallel")
    assert up.returncode == 0, up.stdout + up.stderr
    singles = [float(m) for m in re.findall(r"✓ serving on \S+ after ([0-9.]+) s", up.stdout)]
    (wall,) = [float(m) for m in re.findall(r"4/4 pods serving after ([0-9.]+) s", up.stdout)]
    assert len(singles) == 4 and min(singles) >= 3.0
    # Overlapped, not one after another: one after another the wall time is at least the sum of the
    # boots. 0.85, not less: on a busy 2-core box the launch steps before each boot queue for a core.
    assert wall < 0.85 * sum(singles), (wall, singles)
    status = c3_json("pod", "status")["pods"]
    assert all(p["serving"] and p["placement"]["verdict"] == "ok" for p in status)
    down = c3("down")
    assert down.returncode == 0 and down.stdout.count("stopped") == 4


def test_serve_picks_the_free_gpus_or_asks_for_them(sim):
    write_catalog([stub_entry(), stub_entry("custom/stub-tp4", tp=4)])
    port = free_port()
    ambiguous = c3("serve", "custom/stub", "--port", str(port))
    assert ambiguous.returncode == 2
    assert "several GPUs are free" in one_error_line(ambiguous.stderr) and "--gpus" in ambiguous.stderr
    wrong = c3("serve", "custom/stub", "--gpus", "0,1")
    assert wrong.returncode == 2 and "needs 1" in one_error_line(wrong.stderr)
    sim.append("serve-stub")
    served = c3("serve", "custom/stub", "--gpus", "2", "--port", str(port))
    assert served.returncode == 0, served.stdout + served.stderr
    assert f"serving on http://127.0.0.1:{port}" in served.stdout and "placement ok" in served.stdout
    status = c3_json("pod", "status")
    assert status["pods"] == [] and [(u["name"], u["port"], u["running"]) for u in status["unplanned"]] == [("serve-stub", port, True)]
    # Three GPUs left free but the slug needs four: refused, naming what is free.
    short = c3("serve", "custom/stub-tp4")
    assert short.returncode == 1 and "only 3 are free (0, 1, 3)" in one_error_line(short.stderr)
    assert c3("pod", "down", "serve-stub").returncode == 0


def test_logs_follow_ends_when_the_pod_stops(sim):
    write_catalog([stub_entry()])
    create(sim, "tail", "0")
    assert c3("pod", "up", "tail").returncode == 0
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    follower = subprocess.Popen([sys.executable, "-m", "c3", "pod", "logs", "tail", "--follow", "--tail", "5"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = follower.stdout.readline()
        assert first.strip(), "history lines come first"
        assert c3("pod", "down", "tail").returncode == 0
        assert follower.wait(timeout=30) == 0
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()


def test_whole_estate_up_reports_each_pod_and_fails_when_one_fails(sim):
    write_catalog([stub_entry(), stub_entry("custom/crashy", env={"C3_STUB_CRASH_DURING_BOOT": "1"})])
    create(sim, "good", "0")
    create(sim, "bad", "1", slug="custom/crashy")
    only = c3("up", "--only", "good,nope")
    assert only.returncode == 1 and "nope" in one_error_line(only.stderr)
    up = c3("up")
    assert up.returncode == 1
    assert "[good] ✓ serving" in up.stdout and "1/2 pods serving" in up.stdout
    assert "1 pod(s) failed: bad" in one_error_line(up.stderr)
    again = c3("up", "--only", "good")
    assert again.returncode == 0 and "[good] already running" in again.stdout
    down = c3("down", "--only", "good")
    assert down.returncode == 0 and "[good] stopped" in down.stdout


def test_serve_asks_on_a_terminal(sim):
    import pty

    write_catalog([stub_entry()])
    sim.append("serve-stub")
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    pid, fd = pty.fork()
    if pid == 0:  # the child: c3 serve with a terminal on stdin
        os.chdir(ROOT)
        os.execvpe(sys.executable, [sys.executable, "-m", "c3", "serve", "custom/stub", "--port", str(port)], env)
    output = b""

    def read(until: bytes | None, deadline: float) -> bytes:
        data = b""
        while time.monotonic() < deadline and (until is None or until not in data):
            ready, _, _ = select.select([fd], [], [], 0.2)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            data += chunk
        return data

    try:
        output = read(b"which 1 GPU(s)?", time.monotonic() + 60)
        assert b"free GPUs: 0 (NVIDIA GeForce RTX 3090), 1" in output
        os.write(fd, b"3\n")
        output += read(None, time.monotonic() + 60)
    finally:
        os.close(fd)
        deadline = time.monotonic() + 30
        done, status = os.waitpid(pid, os.WNOHANG)
        while not done and time.monotonic() < deadline:
            time.sleep(0.1)
            done, status = os.waitpid(pid, os.WNOHANG)
        if not done:  # never leave the child behind, even on failure
            os.kill(pid, 9)
            _, status = os.waitpid(pid, 0)
    text = output.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "on GPU 3" in text and "placement ok" in text


def test_a_boot_teaches_the_next_fit(sim):
    """The engine's boot log lands in the fit store (backend/fit/learned.py); `c3 fit` of the same setup then uses it."""
    entry = stub_entry("vllm/stub-qwen", engine="vllm", env={"C3_STUB_WEIGHTS_GIB": "15.3"})
    entry.update(model="Qwen/Qwen3-8B", max_model_len=8192)
    write_catalog([entry])
    before = c3_json("fit", "vllm/stub-qwen", "--gpus", "0")
    assert before["source"] == "predicted"
    create(sim, "learner", "0", slug="vllm/stub-qwen")
    up = c3("pod", "up", "learner")
    assert up.returncode == 0, up.stdout + up.stderr
    store = json.loads((Path(os.environ["C3_STATE"]) / "fit" / "learned.json").read_text())
    (boot,) = store["boots"]
    assert boot["pod"] == "learner" and boot["cards"] == ["rtx-3090"] and boot["measured"]["weights_gib"] == 15.3
    kv = boot["measured"]["available_kv_gib"]  # what the stub engine logged: 24 × 0.9 − 15.3 − 0.6
    assert kv == 5.7 and boot["predicted"]["available_kv_gib"] == before["available_kv_gib"]
    recorded = f"fit: recorded this boot's measured memory (KV 5.70 GiB, {5.7 - before['available_kv_gib']:+.2f} GiB from c3's prediction)"
    assert recorded in (Path(os.environ["C3_STATE"]) / "boot" / "learner.log").read_text()
    after = c3_json("fit", "vllm/stub-qwen", "--gpus", "0")
    assert after["source"] == "learned" and after["learned"]["boots"] == 1 and abs(after["available_kv_gib"] - kv) <= 0.25
    assert c3_json("fit", "vllm/stub-qwen", "--gpus", "0", "--no-learned")["source"] == "predicted"
