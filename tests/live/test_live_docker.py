"""The live hub on the real dockerd: container start/stop arrive through the event stream."""

from __future__ import annotations

from backend.live import LiveState
from backend.models import CatalogEntry, Gpu, Pod
from backend.runtime.boot import launch_spec
from backend.runtime.context import RuntimeContext
from backend.runtime.docker_adapter import DockerRuntime
from tests.support import free_port, wait_until


def test_events_drive_workloads_and_health(docker_client, stub_image, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    runtime = DockerRuntime(docker_client, simulated_probe=True)
    ctx = RuntimeContext(runtime=runtime, probe=None, probe_problem="no NVML in this test")
    port = free_port()
    pod = Pod(name="livetest", slug="custom/stub", gpus=(0,), port=port)
    entry = CatalogEntry(slug="custom/stub", engine="custom", image=stub_image, command=("python3", "/opt/c3/stub_engine.py", "--port", "8000"), container_port=8000)
    spec = launch_spec(pod, entry, [Gpu(index=0, uuid="GPU-x", name="fake", total_mib=None)], mode="env", estate="")
    live = LiveState(ctx, pods=lambda: [pod], health_interval_s=0.2, placement_interval_s=0.2)
    live.start()
    try:
        wait_until(lambda: live.latest().source("workloads") and live.latest().source("workloads").ok)
        assert live.latest().pods[0].workload is None
        runtime.launch(spec, {})
        snap = wait_until(lambda: (s := live.latest()).pods[0].health and s.pods[0].health.healthy and s)
        assert snap.pods[0].workload.running
        assert snap.pods[0].placement.verdict == "unknown" and "NVML" in snap.pods[0].placement.reason
        assert snap.source("gpus").stale  # no probe: stale, retried, nothing crashed
        assert live.sources["workloads"].events_seen > 0
        runtime.stop("livetest", timeout=5)
        wait_until(lambda: live.latest().pods[0].workload is None)
    finally:
        live.stop()
        try:
            docker_client.containers.get("c3-livetest").remove(force=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
