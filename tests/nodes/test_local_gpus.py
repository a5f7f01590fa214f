"""This machine's GPUs in the Nodes mode (and `c3 node status`) come from the same source as the
Orchestration mode's: the NVML adapter (here the real pynvml over the rig's fake NVML), not nvidia-smi —
on a host without nvidia-smi, or one whose nvidia-smi says something else, both show the same GPUs."""

from __future__ import annotations

import os
import stat

import pytest

from backend.nodes.registry import add_node

NVML_GPUS = [("NVIDIA GeForce RTX 3090", 24576, 1000), ("NVIDIA RTX A6000", 46068, 300)]


@pytest.fixture(params=["no-nvidia-smi", "other-nvidia-smi"])
def machine(request, fake_nvml, tmp_path, monkeypatch):
    """The fake NVML's two GPUs, this machine registered as a node, and on PATH either no nvidia-smi
    at all or one that lists a different GPU (a second source that disagrees)."""
    from scripts.rig.fake_nvml import FakeGpu

    fake_nvml.set_gpus([FakeGpu(name=n, total_mib=t, used_mib=u) for n, t, u in NVML_GPUS])
    for key in ("C3_RIG", "C3_DEMO", "C3_RUNTIME"):
        monkeypatch.delenv(key, raising=False)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if request.param == "other-nvidia-smi":
        smi = bin_dir / "nvidia-smi"
        smi.write_text("#!/bin/sh\necho '0, Tesla K80, 11441, 5, GPU-00000000-0000-0000-0000-000000000000, 3.7'\n")
        smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bin_dir))  # the shell itself is /bin/sh; only nvidia-smi is looked up
    add_node("here", "http://127.0.0.1:9", f"{os.environ.get('USER') or 'me'}@127.0.0.1", local=True)
    return request.param


def nvml_view() -> list[tuple[int, str, int | None, int | None]]:
    """What the Orchestration mode's source (the NVML adapter, as the facade opens it) reads."""
    from backend.wiring import open_probe

    return [(s.gpu.index, s.gpu.name, s.gpu.total_mib, s.used_mib) for s in open_probe().snapshots()]


def test_node_status_lists_this_machines_gpus_from_nvml(machine):
    from backend.views.registry import node_statuses

    [row] = node_statuses()
    assert row.local and row.gpu_error is None
    assert [(g.index, g.name, g.total_mib, g.used_mib) for g in row.gpus] == nvml_view()
    assert [g.name for g in row.gpus] == [n for n, _, _ in NVML_GPUS]


def test_nodes_mode_and_orchestration_mode_show_the_same_gpus(machine, monkeypatch):
    """The cockpit's facade over the real NVML adapter: the Nodes mode's local row is its own GPU reading."""
    from c3.services_real import RealServices

    monkeypatch.setenv("C3_RUNTIME", "sim")  # no Docker needed to read GPUs
    svc = RealServices(readonly=True)
    try:
        orchestration = [(s.gpu.index, s.gpu.name, s.gpu.total_mib, s.used_mib) for s in svc.gpu_snapshots()]
        [row] = svc.nodes()
        assert row.local and row.gpu_error is None
        assert [(g.index, g.name, g.total_mib, g.used_mib) for g in row.gpus] == orchestration
        assert [name for _, name, _, _ in orchestration] == [n for n, _, _ in NVML_GPUS]
    finally:
        svc.close()
