"""The NVML adapter through the REAL pynvml binding over the test rig's fake libnvidia-ml.so.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend.errors import EnvironmentProblem
from backend.gpu.nvml import NvmlProbe
from backend.wiring import open_probe

C3_BIN = Path(sys.executable).with_name("c3")


@pytest.fixture
def nvml(fake_nvml):
    from scripts.rig.fake_nvml import FakeGpu

    uuids = fake_nvml.set_gpus(
        [
            FakeGpu(name="NVIDIA GeForce RTX 3090", total_mib=24576, sm="8.6", reserved_mib=422, used_mib=1000, util=12, temp=51, power_w=120.5, limit_w=350.0),
            FakeGpu(name="NVIDIA GB10", total_mib=0, sm="12.1", flags=("nomem", "noecc", "nolimit")),
            FakeGpu(name="NVIDIA RTX A6000", total_mib=46068, sm="8.6", reserved_mib=450, ecc=True, flags=("noutil", "notemp", "nopower", "noprocs")),
        ]
    )
    fake_nvml.add_process(uuids[0], 4242, used_mib=2048)
    return fake_nvml, uuids


def test_adapter_over_real_pynvml(nvml):
    fake, uuids = nvml
    probe = NvmlProbe()
    try:
        g0, g1, g2 = probe.gpus()
        assert (g0.uuid, g0.name, g0.total_mib, g0.reserved_mib, g0.sm, g0.ecc) == (uuids[0], "NVIDIA GeForce RTX 3090", 24576, 422, "8.6", False)
        assert g0.cuda_total_mib == 24154
        assert (g1.name, g1.total_mib, g1.cuda_total_mib, g1.sm, g1.ecc) == ("NVIDIA GB10", None, None, "12.1", None)
        assert (g2.ecc, g2.total_mib) == (True, 46068)
        s0, s1, s2 = probe.snapshots()
        assert (s0.util_pct, s0.temp_c, s0.power_w, s0.power_limit_w) == (12, 51, 120.5, 350.0)
        assert [(p.pid, p.gpu_uuid, p.used_mib) for p in s0.processes] == [(4242, uuids[0], 2048)]
        assert s0.free_mib is not None and s0.used_mib is not None
        assert (s1.used_mib, s1.free_mib, s1.power_limit_w) == (None, None, None)
        assert (s2.util_pct, s2.temp_c, s2.power_w, s2.processes) == (None, None, None, ())
        assert [p.pid for p in probe.processes()] == [4242]
        fake.update_gpu(0, util=88)
        assert probe.snapshots()[0].util_pct == 88  # live values are re-read each time
    finally:
        probe.close()


def test_open_probe_picks_nvml_without_c3_rig(nvml):
    probe = open_probe()
    assert probe.source == "nvml" and len(probe.gpus()) == 3
    probe.close()


def test_c3_gpus_json_over_fake_nvml(nvml):
    fake, uuids = nvml
    env = {k: v for k, v in fake.env().items() if k != "C3_RIG"}
    done = subprocess.run([str(C3_BIN), "gpus", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["source"] == "nvml"
    assert [g["uuid"] for g in data["gpus"]] == uuids
    assert data["gpus"][1]["total_mib"] is None and data["gpus"][0]["processes"] == [{"pid": 4242, "used_mib": 2048}]
    human = subprocess.run([str(C3_BIN), "gpus"], capture_output=True, text=True, env=env, timeout=120)
    assert human.returncode == 0 and "n/a (unified)" in human.stdout and "Traceback" not in human.stderr


def test_init_failure_is_exit_3(nvml):
    fake, _ = nvml
    fake.update(init_error=9)  # NVML_ERROR_DRIVER_NOT_LOADED
    with pytest.raises(EnvironmentProblem, match="NVML is not usable"):
        NvmlProbe()
    env = {k: v for k, v in fake.env().items() if k != "C3_RIG"}
    done = subprocess.run([str(C3_BIN), "gpus"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 3
    assert done.stderr.startswith("c3: error: no GPUs to read: NVML is not usable") and "Traceback" not in done.stderr
    assert os.environ.get("C3_RIG") is None
