"""Pods as real containers on the real dockerd, GPUs from the fake NVML (real pynvml), placement from the host.

The stub image stands in for the engine; `env` GPU mode hands it NVIDIA_VISIBLE_DEVICES and the GPU
registration directory, and the fake NVML maps its registration back to the host pid — the pid whose
/proc/<pid>/cgroup names the container, exactly as with real NVML.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scripts.rig.fake_nvml import FakeGpu
from tests.runtime.helpers import ROOT, c3, c3_json, free_port, one_error_line, stub_entry, write_catalog

SECRET = "hf_c3_test_token_not_real"


@pytest.fixture
def rig(docker_client, stub_image, fake_nvml, monkeypatch, tmp_path):
    """4 fake RTX 3090s, Docker runtime in env mode, a custom stub slug; removes every pod container it made."""
    uuids = fake_nvml.set_gpus([FakeGpu() for _ in range(4)])
    monkeypatch.setenv("C3_GPU_MODE", "env")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.delenv("C3_RUNTIME", raising=False)
    write_catalog([
        stub_entry(image=stub_image),
        stub_entry("custom/stray", image=stub_image, env={"C3_STUB_GPUS": uuids[3]}),
        stub_entry("custom/crashy", image=stub_image, env={"C3_STUB_CRASH_DURING_BOOT": "1", "C3_STUB_STARTUP_DELAY": "0.4"}),
        stub_entry("custom/slow", image=stub_image, env={"C3_STUB_STARTUP_DELAY": "2"}),
        stub_entry("vllm/stub-big", engine="vllm", image=stub_image),
    ])
    names: list[str] = []
    yield {"uuids": uuids, "names": names, "nvml": fake_nvml, "docker": docker_client}
    for name in names:
        try:
            docker_client.containers.get(f"c3-{name}").remove(force=True)
        except Exception:  # noqa: BLE001 - already gone
            pass


def create(rig, name, gpus, slug="custom/stub", extra=()):
    port = free_port()
    result = c3("pod", "create", name, "--gpus", gpus, "--slug", slug, "--port", str(port), "--force", *extra)
    assert result.returncode == 0, result.stdout + result.stderr
    rig["names"].append(name)
    return port


def test_a_docker_boot_teaches_the_next_fit(rig, stub_image):
    """The Docker runtime's boot records what the engine logged (backend/fit/learned.py): `c3 fit` then says so."""
    entry = stub_entry("vllm/stub-qwen", engine="vllm", image=stub_image, env={"C3_STUB_WEIGHTS_GIB": "15.3"})
    entry.update(model="Qwen/Qwen3-8B", max_model_len=8192)
    catalog = Path(os.environ["C3_HOME"]) / "catalog.d" / "learn.yaml"
    catalog.write_text(yaml.safe_dump({"entries": [entry]}))  # beside the rig's own catalog file
    assert c3_json("fit", "vllm/stub-qwen", "--gpus", "2")["source"] == "predicted"
    create(rig, "learner", "2", slug="vllm/stub-qwen")
    up = c3("pod", "up", "learner")
    assert up.returncode == 0, up.stdout + up.stderr
    (boot,) = json.loads((Path(os.environ["C3_STATE"]) / "fit" / "learned.json").read_text())["boots"]
    assert boot["pod"] == "learner" and boot["cards"] == ["rtx-3090"] and boot["measured"]["available_kv_gib"] == 5.7
    after = c3_json("fit", "vllm/stub-qwen", "--gpus", "2")
    assert after["source"] == "learned" and after["available_kv_gib"] == 5.7 and after["learned"]["boots"] == 1


def test_create_up_serving_placement_ok_down(rig):
    port = create(rig, "chat", "1")
    up = c3("pod", "up", "chat")
    assert up.returncode == 0, up.stdout + up.stderr
    assert f"serving on http://127.0.0.1:{port}" in up.stdout and "placement ok" in up.stdout
    assert "gpu mode env" in up.stdout
    container = rig["docker"].containers.get("c3-chat")
    assert container.labels["io.c3.pod"] == "chat" and container.labels["io.c3.slug"] == "custom/stub"
    assert container.labels["io.c3.estate"].endswith("estate.yml")
    assert container.attrs["HostConfig"]["RestartPolicy"]["Name"] == "unless-stopped"  # switched once healthy
    env = dict(e.split("=", 1) for e in container.attrs["Config"]["Env"])
    assert env["HF_TOKEN"] == SECRET and env["NVIDIA_VISIBLE_DEVICES"] == rig["uuids"][1]
    assert SECRET not in " ".join(container.attrs["Config"]["Entrypoint"] or [])
    mounts = {m["Destination"]: m["Source"] for m in container.attrs["Mounts"]}
    assert mounts["/root/.cache/huggingface"] == os.environ["HF_HOME"]
    (row,) = c3_json("pod", "status")["pods"]
    assert row["running"] and row["serving"]
    assert row["placement"]["verdict"] == "ok"
    assert row["placement"]["requested"] == [rig["uuids"][1]] and row["placement"]["actual"] == [rig["uuids"][1]]
    logs = c3("pod", "logs", "chat", "--tail", "40")
    assert logs.returncode == 0 and "Starting to load model" in logs.stdout
    boot_log = (Path(os.environ["C3_STATE"]) / "boot" / "chat.log").read_text()
    for text in (up.stdout, up.stderr, json.dumps(row), boot_log, logs.stdout):
        assert SECRET not in text
    rm = c3("pod", "rm", "chat")
    assert rm.returncode == 1 and "running" in one_error_line(rm.stderr)
    down = c3("pod", "down", "chat")
    assert down.returncode == 0 and "stopped" in down.stdout
    assert not rig["docker"].containers.list(all=True, filters={"name": "^/c3-chat$"})
    assert c3_json("pod", "status")["pods"][0]["placement"]["verdict"] == "unknown"


def test_gpus_that_did_not_reach_the_container_are_a_mismatch(rig):
    create(rig, "stray", "0", slug="custom/stray")
    up = c3("pod", "up", "stray")
    assert up.returncode == 1, up.stdout + up.stderr
    assert "not on exactly its GPUs" in one_error_line(up.stderr)
    place = c3_json("pod", "status")["pods"][0]["placement"]
    assert place["verdict"] == "mismatch"
    assert place["missing"] == [rig["uuids"][0]] and place["extra"] == [rig["uuids"][3]]


def test_stranger_on_the_pods_gpu_is_refused_then_reported(rig):
    stranger = subprocess.Popen(["sleep", "300"])
    try:
        rig["nvml"].add_process(rig["uuids"][2], pid=stranger.pid, used_mib=900)
        create(rig, "shared", "2")
        refused = c3("pod", "up", "shared")
        assert refused.returncode == 1
        assert f"GPU 2 held by pid {stranger.pid} (a process c3 did not start, 900 MiB)" in one_error_line(refused.stderr)
        forced = c3("pod", "up", "shared", "--force")
        assert forced.returncode == 0, forced.stdout + forced.stderr
        assert "warning: --force passes the gpus gate" in forced.stdout
        place = c3_json("pod", "status")["pods"][0]["placement"]
        assert place["verdict"] == "ok"
        assert [(f["pid"], f["gpu_index"], f["owner"]) for f in place["foreign"]] == [(stranger.pid, 2, None)]
    finally:
        stranger.kill()
        stranger.wait()


def test_every_gate_refuses_with_a_clear_message(rig):
    # VRAM: 9000 MiB in use on GPU 3; vLLM at util 0.9 reserves ceil(24576 × 0.9) there.
    rig["nvml"].update_gpu(3, used_mib=9000)
    create(rig, "big", "3", slug="vllm/stub-big")
    vram = one_error_line(c3("pod", "up", "big").stderr)
    assert re.search(r"GPU 3 \(NVIDIA GeForce RTX 3090\) has 15\.2 GiB free but vllm/stub-big reserves 2\d\.\d GiB there \(short by \d+\.\d GiB, \d+ MiB\)", vram), vram
    # Port: a listener on the pod's port.
    port = create(rig, "porty", "0")
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", port))
        sock.listen()
        line = one_error_line(c3("pod", "up", "porty").stderr)
        assert f"port {port} is already in use" in line
    # GPU claimed by a running pod of another estate file.
    create(rig, "first", "1")
    assert c3("pod", "up", "first").returncode == 0
    other = Path(os.environ["C3_HOME"]) / "other.yml"
    create(rig, "second", "1", extra=("--file", str(other)))
    claimed = c3("pod", "up", "second", "--file", str(other))
    assert claimed.returncode == 1 and "GPU 1 claimed by running pod first" in one_error_line(claimed.stderr)


def test_four_pods_boot_in_parallel(rig):
    for i in range(4):
        create(rig, f"p{i}", str(i), slug="custom/slow")
    up = c3("up", "--parallel", "--jobs", "4")
    assert up.returncode == 0, up.stdout + up.stderr
    singles = [float(m) for m in re.findall(r"✓ serving on \S+ after ([0-9.]+) s", up.stdout)]
    (wall,) = [float(m) for m in re.findall(r"4/4 pods serving after ([0-9.]+) s", up.stdout)]
    assert len(singles) == 4 and min(singles) >= 2.0
    # One after another the wall time is at least the sum of the boots; 0.85 leaves a busy 2-core box
    # room for the launch steps that queue for a core before each boot.
    assert wall < 0.85 * sum(singles), (wall, singles)
    rows = c3_json("pod", "status")["pods"]
    assert [r["placement"]["verdict"] for r in rows] == ["ok"] * 4
    assert [r["placement"]["actual"] for r in rows] == [[u] for u in rig["uuids"]]
    assert c3("down").returncode == 0
    assert not rig["docker"].containers.list(all=True, filters={"label": "io.c3.pod"})


def test_container_crashing_during_boot_gives_its_log_and_no_restart_loop(rig):
    create(rig, "crashy", "0", slug="custom/crashy")
    up = c3("pod", "up", "crashy")
    assert up.returncode == 1
    assert "pod crashy failed to boot: the engine stopped during boot (exit code 1)" in one_error_line(up.stderr)
    assert "CUDA out of memory" in up.stderr
    container = rig["docker"].containers.get("c3-crashy")
    assert container.status == "exited" and container.attrs["RestartCount"] == 0
    assert container.attrs["HostConfig"]["RestartPolicy"]["Name"] == "no"
    assert "CUDA out of memory" in (Path(os.environ["C3_STATE"]) / "boot" / "crashy.log").read_text()


def test_nvml_missing_gives_placement_unknown_and_nothing_crashes(rig, monkeypatch):
    create(rig, "blind", "0")
    monkeypatch.delenv("C3_FAKE_NVML_STATE")  # the fake library now fails nvmlInit like a missing driver
    # No NVML: the VRAM and GPU-holder gates cannot be judged, so `up` refuses, saying so, and starts nothing…
    refused = c3("pod", "up", "blind")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    line = one_error_line(refused.stderr)
    assert "vram gate not checked" in line and "gpus gate not checked" in line and "--force" in refused.stderr
    assert not rig["docker"].containers.list(all=True, filters={"name": "^/c3-blind$"})
    # …and --force boots it, loudly.
    up = c3("pod", "up", "blind", "--force")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "WARNING: --force boots without the vram gate" in up.stdout
    assert "pinning GPUs by index" in up.stdout and "placement unknown" in up.stdout
    (row,) = c3_json("pod", "status")["pods"]
    assert row["running"] and row["serving"] and row["placement"]["verdict"] == "unknown"
    assert "NVML" in row["placement"]["reason"] or "GPU" in row["placement"]["reason"]
    assert c3("pod", "down", "blind").returncode == 0


@pytest.mark.parametrize("mode,driver", [("nvidia", "nvidia"), ("cdi", "cdi")])
def test_device_modes_reach_the_daemon_as_device_requests(rig, monkeypatch, mode, driver):
    """This daemon has no NVIDIA runtime and no CDI: it must refuse the device request (proof that c3
    pins by device, not by an environment mask), and c3 must say so in one line and leave nothing behind."""
    monkeypatch.setenv("C3_GPU_MODE", mode)
    create(rig, f"dev-{mode}", "0")
    up = c3("pod", "up", f"dev-{mode}")
    assert up.returncode == 1, up.stdout + up.stderr
    line = one_error_line(up.stderr)
    assert f"Docker refused to start pod dev-{mode}" in line and driver in line
    assert "--gpu-mode" in up.stderr
    assert not rig["docker"].containers.list(all=True, filters={"name": f"^/c3-dev-{mode}$"})


def test_two_concurrent_ups_of_one_pod_leave_one_serving_container(rig):
    create(rig, "race", "0")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-m", "c3", "pod", "up", "race"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        results.append((proc.returncode, out, err))
    assert 0 in [code for code, _, _ in results], results
    for code, _, err in results:
        assert code in (0, 1) and "Traceback" not in err
    assert len(rig["docker"].containers.list(filters={"name": "^/c3-race$"})) == 1
    (row,) = c3_json("pod", "status")["pods"]
    assert row["serving"] and row["placement"]["verdict"] == "ok"


def _kill_and_wait_restarted(container, count: int, timeout_s: float = 20.0) -> None:
    """SIGKILL the container's engine (its main process, as Docker reports it) and wait until Docker's
    `unless-stopped` policy has brought it back: RestartCount == count and running again."""
    import signal
    import time

    container.reload()
    os.kill(container.attrs["State"]["Pid"], signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while True:
        container.reload()
        if container.attrs["RestartCount"] == count and container.status == "running":
            return
        assert time.monotonic() < deadline, f"not restarted {count}× within {timeout_s} s: {container.status}, RestartCount {container.attrs['RestartCount']}"
        time.sleep(0.1)


def test_a_container_docker_restarted_says_how_often_in_pod_status(rig):
    create(rig, "chat", "0")
    assert c3("pod", "up", "chat").returncode == 0
    (row,) = c3_json("pod", "status")["pods"]
    assert row["restart_count"] == 0
    container = rig["docker"].containers.get("c3-chat")
    _kill_and_wait_restarted(container, 1)
    (row,) = c3_json("pod", "status")["pods"]
    assert row["restart_count"] == 1 and row["running"], row
    status = c3("pod", "status")
    assert status.returncode == 0 and "⚠ restarted (1×)" in status.stdout, status.stdout


async def test_the_cockpit_announces_a_docker_restart_once_and_counts_it_in_the_title(rig, monkeypatch):
    """The real dockerd restarts a SIGKILLed engine under `unless-stopped`; the cockpit on the real
    facade announces `restarted (1×)` once, keeps it in the mode bar's trouble count, and announces
    again (`2×`) when Docker restarts it a second time."""
    import asyncio

    from c3.app import C3App
    from c3.services_real import RealServices
    from tests.cockpit.conftest import orchestration, wait_for

    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    create(rig, "chat", "0")
    assert (await asyncio.to_thread(c3, "pod", "up", "chat")).returncode == 0
    container = rig["docker"].containers.get("c3-chat")
    svc = await asyncio.to_thread(RealServices)
    app = C3App(svc)
    toasts: list[str] = []
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            notify = app.notify

            def spy(message, **kwargs):
                toasts.append(str(message))
                return notify(message, **kwargs)

            app.notify = spy  # type: ignore[method-assign]
            await wait_for(pilot, lambda: any(p.state == "serving" for p in orchestration(app).pods), timeout=30, what="the pod serving")
            await asyncio.to_thread(_kill_and_wait_restarted, container, 1)
            await wait_for(pilot, lambda: any(m.startswith("chat: restarted") for m in toasts), timeout=30, what="the restart toast")
            await pilot.pause(3.0)  # a few more readings of the same restart count
            restarted = [m for m in toasts if m.startswith("chat: restarted")]
            assert restarted == [restarted[0]] and restarted[0].startswith("chat: restarted (1×) — "), toasts
            bar = str(app.screen.query_one("#modebar").render())
            assert "1 restarted" in bar, bar
            await asyncio.to_thread(_kill_and_wait_restarted, container, 2)
            await wait_for(pilot, lambda: any(m.startswith("chat: restarted (2×)") for m in toasts), timeout=30, what="the second restart toast")
    finally:
        svc.close()


def test_pod_exec_runs_a_command_in_the_container_with_secrets_masked(rig):
    create(rig, "shell", "0")
    assert c3("pod", "up", "shell").returncode == 0
    echoed = c3("pod", "exec", "shell", "--", "sh", "-c", "echo hi from $HOSTNAME; echo to stderr >&2")
    assert echoed.returncode == 0, echoed.stdout + echoed.stderr
    assert "hi from " in echoed.stdout and "to stderr" in echoed.stdout + echoed.stderr
    env = c3("pod", "exec", "shell", "--", "env")
    assert env.returncode == 0 and "HF_TOKEN=***" in env.stdout and SECRET not in env.stdout + env.stderr
    failed = c3("pod", "exec", "shell", "--", "sh", "-c", "echo partial; exit 3")
    assert failed.returncode == 1 and "partial" in failed.stdout, (failed.stdout, failed.stderr)
    assert "exited 3 in pod shell" in one_error_line(failed.stderr)
    missing = c3("pod", "exec", "shell", "--", "no-such-program-c3")
    assert missing.returncode == 1 and one_error_line(missing.stderr)
    slow = c3("pod", "exec", "shell", "--timeout", "2", "--", "sleep", "30", timeout=60)
    assert slow.returncode == 1 and "did not finish within 2 s" in one_error_line(slow.stderr)
    assert c3("pod", "down", "shell").returncode == 0
    stopped = c3("pod", "exec", "shell", "--", "true")
    assert stopped.returncode == 1 and "pod shell is not running" in one_error_line(stopped.stderr)


def test_pod_status_reads_a_containers_cpu_and_memory_from_the_daemon(rig):
    """`docker stats` figures for a running pod's container (issue 25), and the container's own memory
    limit once it has one (c3 sets none: `mem_limit_bytes` null)."""
    create(rig, "chat", "2")
    up = c3("pod", "up", "chat")
    assert up.returncode == 0, up.stdout + up.stderr
    (row,) = c3_json("pod", "status")["pods"]
    use = row["usage"]
    assert use is not None and use["cpu_pct"] is not None and use["cpu_pct"] >= 0, row
    assert use["mem_bytes"] > 1 << 20 and use["mem_limit_bytes"] is None, use
    rig["docker"].containers.get("c3-chat").update(mem_limit="512m", memswap_limit="1g")
    (row,) = c3_json("pod", "status")["pods"]
    assert row["usage"]["mem_limit_bytes"] == 512 << 20 and row["usage"]["mem_bytes"] < 512 << 20, row["usage"]
    status = c3("pod", "status")
    assert re.search(r"CPU [\d.]+% · RAM [\d.]+ MiB / 512\.0 MiB", status.stdout), status.stdout
