"""GPU registration files written by the stub engine (as a local process)."""

from __future__ import annotations

import os

from backend.stub_registry import read_registrations
from tests.rig.test_stub_http import poll


def test_registration_lists_the_masked_gpus_and_goes_away_on_exit(stub_process, tmp_path):
    registry = tmp_path / "registry"
    registry.mkdir()
    stub = stub_process("--gpu-memory-utilization", "0.8", "--name", "pod-a",
                        env={"C3_GPU_REGISTRY": str(registry), "NVIDIA_VISIBLE_DEVICES": "GPU-aaa,GPU-bbb"})
    regs = poll(lambda: read_registrations(registry))
    assert len(regs) == 1
    reg = regs[0]
    assert reg.pid == stub.pid and reg.name == "pod-a" and reg.port == stub.port
    assert [(g.token, g.mib, g.fraction) for g in reg.gpus] == [("GPU-aaa", 0, 0.8), ("GPU-bbb", 0, 0.8)]
    assert reg.host_pid() == stub.pid
    assert stub.stop() == 0
    assert os.listdir(registry) == []


def test_override_and_explicit_memory(stub_process, tmp_path):
    env = {"C3_GPU_REGISTRY": str(tmp_path), "NVIDIA_VISIBLE_DEVICES": "GPU-aaa", "C3_STUB_GPUS": "0,1",
           "C3_STUB_MEM_MIB": "1234"}
    stub = stub_process(env=env)
    reg = poll(lambda: read_registrations(tmp_path))[0]
    assert [(g.token, g.mib) for g in reg.gpus] == [("0", 1234), ("1", 1234)]
    assert reg.gpus[0].mib_for(24576) == 1234 and reg.gpus[0].matches("GPU-x", 1) is False
    stub.stop(9)  # a crash leaves the file behind: readers must ignore dead registrations
    assert [p.name for p in tmp_path.iterdir()] and read_registrations(tmp_path, live_only=True) == []


def test_registration_written_during_boot_and_removed_on_crash(stub_process, tmp_path):
    stub = stub_process("--crash-during-boot", "--startup-delay", "1", wait=False,
                        env={"C3_GPU_REGISTRY": str(tmp_path)})
    assert poll(lambda: read_registrations(tmp_path))[0].gpus[0].token == "0"
    assert stub.wait_exit() == 1
    assert list(tmp_path.iterdir()) == []
