"""Per-pod CPU and memory (issue 25: what k9s / lazydocker users expect): the simulator's /proc reading
of a busy process, and the Docker adapter's arithmetic on a recorded Engine API stats document."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from backend.runtime import cgroup
from backend.runtime.docker_adapter import usage_from_stats
from backend.sim.runtime import SimRuntime
from c3.metrics_text import usage_text
from tests.runtime.helpers import c3, c3_json, stub_entry, write_catalog
from tests.runtime.test_sim_lifecycle import create, sim  # noqa: F401 - the simulated rig fixture

RECORDED = Path(__file__).parent / "data" / "docker_stats_cgroup2.json"


@pytest.fixture
def busy(tmp_path):
    """A simulator record for a process that spins one core and holds about 64 MiB."""
    child = subprocess.Popen([sys.executable, "-c", "b = bytearray(64 << 20)\nwhile True: pass"], start_new_session=True)
    try:
        runtime = SimRuntime(base=tmp_path)
        (tmp_path / "pods").mkdir()
        start = None
        while start is None:
            start = cgroup.start_time(child.pid)
        (tmp_path / "pods" / "busy.json").write_text(json.dumps({"pid": child.pid, "start_time": start, "slug": "custom/stub"}))
        yield runtime
    finally:
        child.kill()
        child.wait()


def test_a_busy_simulated_pod_shows_cpu_and_rss(busy):
    found = busy.usage(["busy", "absent"], interval=0.5)
    assert set(found) == {"busy"}  # a pod with no running workload is left out, not zero
    use = found["busy"]
    assert use.cpu_pct is not None and use.cpu_pct > 20, use
    assert use.mem_bytes > 60 << 20 and use.mem_limit_bytes is None


def test_the_docker_arithmetic_on_a_recorded_stats_document():
    stats = json.loads(RECORDED.read_text())
    use = usage_from_stats(stats, limit=8 << 30)
    # CPU: (container delta / host delta) × online CPUs × 100, as `docker stats` prints it.
    cpu_delta = 5_349_216_000 - 4_251_302_000
    system_delta = 90_431_850_000_000 - 90_415_850_000_000  # 16 CPUs over one second
    assert use.cpu_pct == round(cpu_delta / system_delta * 16 * 100, 1) == 109.8  # 1.1 cores busy
    # Memory: usage less inactive_file (cgroup v2), not the raw usage with page cache.
    assert use.mem_bytes == 1_624_834_048 - 402_653_184
    assert usage_text(use) == "CPU 110% · RAM 1.1 GiB / 8.0 GiB"


def test_cgroup_v1_cache_one_shot_and_stopped_documents():
    v1 = {"memory_stats": {"usage": 300 << 20, "stats": {"total_inactive_file": 100 << 20, "inactive_file": 1}},
          "cpu_stats": {"cpu_usage": {"total_usage": 10, "percpu_usage": [5, 5]}, "system_cpu_usage": 100},
          "precpu_stats": {"cpu_usage": {"total_usage": 0}, "system_cpu_usage": 0}}
    one_shot = usage_from_stats(v1)
    assert one_shot.mem_bytes == 200 << 20 and one_shot.cpu_pct is None  # no earlier sample: no rate, not 0
    assert usage_from_stats({"memory_stats": {}, "cpu_stats": {}, "precpu_stats": {}}) is None  # a stopped container's
    assert usage_text(one_shot) == "CPU – · RAM 200.0 MiB"


def test_pod_status_gives_a_running_pods_cpu_and_ram_in_json_and_text(sim):
    write_catalog([stub_entry()])
    create(sim, "chat", "1")
    assert c3("pod", "up", "chat").returncode == 0
    (row,) = c3_json("pod", "status")["pods"]
    assert row["running"] and set(row["usage"]) == {"cpu_pct", "mem_bytes", "mem_limit_bytes"}
    assert row["usage"]["cpu_pct"] >= 0 and row["usage"]["mem_bytes"] > 1 << 20 and row["usage"]["mem_limit_bytes"] is None
    text = c3("pod", "status")
    assert text.returncode == 0 and re.search(r"^\s+CPU [\d.]+% · RAM [\d.]+ MiB$", text.stdout, re.M), text.stdout
    assert c3("pod", "down", "chat").returncode == 0
    assert c3_json("pod", "status")["pods"][0]["usage"] is None  # a stopped pod has no reading, not zeros
