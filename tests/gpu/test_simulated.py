"""The simulated rig: YAML parsing, the demo rig, deterministic UUIDs, registered processes."""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path

import pytest

from backend.errors import EnvironmentProblem, UsageError
from backend.gpu.registry import GpuRegistry
from backend.sim.probe import DEMO_RIG, SimulatedProbe, derive_uuid, load_rig
from backend.wiring import open_probe

RIG = """\
gpus:
  - {name: "NVIDIA GeForce RTX 3090", total_mib: 24576, sm: "8.6"}
  - {name: "NVIDIA GeForce RTX 5090", total_mib: 32607, sm: 12.0, used_mib: 512, uuid: GPU-fixed}
  - {name: "NVIDIA GB10", total_mib: null, sm: 12.1}
"""


def test_rig_yaml_as_in_design(tmp_path: Path, monkeypatch):
    path = tmp_path / "rig.yaml"
    path.write_text(RIG)
    monkeypatch.setenv("C3_RIG", str(path))
    probe = open_probe()
    assert probe.source == f"simulated:{path}"
    gpus = probe.gpus()
    assert [(g.index, g.name, g.total_mib, g.sm) for g in gpus] == [
        (0, "NVIDIA GeForce RTX 3090", 24576, "8.6"),
        (1, "NVIDIA GeForce RTX 5090", 32607, "12.0"),
        (2, "NVIDIA GB10", None, "12.1"),
    ]
    assert gpus[0].uuid == derive_uuid(0, "NVIDIA GeForce RTX 3090") and gpus[0].uuid.startswith("GPU-")
    assert gpus[1].uuid == "GPU-fixed"
    assert [s.used_mib for s in probe.snapshots()] == [0, 512, 0]
    # deterministic across probes (and so across processes)
    assert open_probe().gpus() == gpus


def test_demo_rig_has_two_families(monkeypatch):
    monkeypatch.setenv("C3_RIG", "demo")
    probe = open_probe()
    assert probe.source == "simulated:demo"
    names = [g.name for g in probe.gpus()]
    assert len(names) == 4 and len(set(names)) == 2
    monkeypatch.delenv("C3_RIG")
    assert open_probe(demo=True).gpus() == probe.gpus()
    assert len(DEMO_RIG.gpus) == 4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpus: [\n", "is not valid YAML"),
        ("- a\n", "must be a mapping with a `gpus:` list"),
        ("gpus:\n  - {name: x, total_mib: -1}\n", "gpus.0.total_mib"),
        ("gpus:\n  - {name: x, sm: eight}\n", "sm must look like 8.6"),
        ("gpus:\n  - {name: x, colour: red}\n", "colour"),
        ("gpus:\n  - {name: a, uuid: GPU-1}\n  - {name: b, uuid: GPU-1}\n", "share a uuid"),
    ],
)
def test_bad_rig_files_are_usage_errors_naming_the_file(tmp_path: Path, text, expected):
    path = tmp_path / "rig.yaml"
    path.write_text(text)
    with pytest.raises(UsageError) as info:
        load_rig(path)
    assert str(path) in info.value.message and expected in info.value.message


def test_missing_rig_file(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("C3_RIG", str(tmp_path / "nope.yaml"))
    with pytest.raises(UsageError, match="does not exist"):
        open_probe()


def test_neither_probe_is_an_environment_problem(monkeypatch):
    monkeypatch.setenv("LD_LIBRARY_PATH", "/nonexistent")
    try:
        probe = open_probe()
    except EnvironmentProblem as error:
        assert "C3_RIG is not set" in error.message and error.exit_code == 3
    else:  # a machine with a real GPU driver
        assert probe.source == "nvml"


def _register(directory: Path, name: str, pid: int, *gpu_lines: str, container: str | None = None) -> None:
    lines = ["# c3 gpu registration v1", f"pid {pid}", "name x", "port 1", "hostname h"]
    lines += [f"container {container}"] if container else []
    lines += [f"gpu {g}" for g in gpu_lines]
    (directory / name).write_text("\n".join(lines) + "\n")


def test_registered_processes_add_to_used_memory(tmp_path: Path):
    """The stub engine's registration files (backend/sim/stub_engine.py `Registration`) land on the rig."""
    registry = tmp_path / "reg"
    registry.mkdir()
    probe = SimulatedProbe(DEMO_RIG, registry=GpuRegistry(registry))
    gpus = probe.gpus()
    me = os.getpid()
    _register(registry, f"host-{me}.gpu", me, f"{gpus[1].uuid} 20000 0.0000", f"{gpus[2].uuid} 20000 0.0000")
    _register(registry, "host-dead.gpu", 2**22 + 12345, f"{gpus[0].uuid} 5 0.0")
    _register(registry, "by-index.gpu", me, "3 0 0.5000")  # by index, fraction of the total
    _register(registry, "ctr.gpu", 77, "0 100 0", container="ab" * 32)  # no such container here: ignored
    _register(registry, "foreign.gpu", me, "GPU-other-machine 1 0.0")
    (registry / "junk.gpu").write_text("pid many\ngpu x y z\n")
    (registry / "half.gpu.tmp").write_text("pid 1\n")
    snaps = probe.snapshots()
    assert [s.used_mib for s in snaps] == [14, 20014, 20018, 18 + math.ceil(32607 * 0.5)]
    assert snaps[1].free_mib == 24576 - 422 - 20014
    assert snaps[1].util_pct > 0 and snaps[0].util_pct == 0
    assert [(p.pid, p.gpu_uuid) for p in probe.processes()] == [(me, gpus[3].uuid), (me, gpus[1].uuid), (me, gpus[2].uuid)]


def test_registration_for_all_gpus(tmp_path: Path):
    _register(tmp_path, "a.gpu", os.getpid(), "all 100 0")
    probe = SimulatedProbe(DEMO_RIG, registry=GpuRegistry(tmp_path))
    assert [s.used_mib for s in probe.snapshots()] == [114, 114, 118, 118]


def test_registry_location_follows_env(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("C3_GPU_REGISTRY", str(tmp_path / "r"))
    assert GpuRegistry.default().path == tmp_path / "r"
    monkeypatch.delenv("C3_GPU_REGISTRY")
    assert GpuRegistry.default().path == Path(os.environ["C3_STATE"]) / "sim" / "gpu-registry"


def test_derived_uuids_match_the_fake_nvml_rule():
    """A rig YAML and the rig's fake NVML with the same GPUs agree on identity."""
    from scripts.rig.fake_nvml import derived_uuid

    assert derive_uuid(3, "NVIDIA GeForce RTX 5090") == derived_uuid(3, "NVIDIA GeForce RTX 5090")
    assert derive_uuid(0, "NVIDIA GeForce RTX 3090") != derive_uuid(1, "NVIDIA GeForce RTX 3090")


def test_two_engines_on_one_card_never_hold_more_than_it_has(tmp_path: Path):
    """The demo's misplaced pod lands on a GPU another pod holds: both engines register 0.9 × total.
    They share what the card has beside its base use in proportion to what they asked (here half
    each), and per card the processes add up to no more than the card's used memory (it showed
    2 × 22,119 MiB on 24 GiB). A card asked for less than it has is untouched."""
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        me = os.getpid()
        _register(tmp_path, "a.gpu", me, "0 0 0.9000", "1 0 0.4000")
        _register(tmp_path, "b.gpu", sleeper.pid, "0 0 0.9000", "1 0 0.4000")
        probe = SimulatedProbe(DEMO_RIG, registry=GpuRegistry(tmp_path))
        snaps = probe.snapshots()
        room = 24576 - 422 - 14
        held = {p.pid: p.used_mib for p in snaps[0].processes}
        assert held == {me: room // 2, sleeper.pid: room // 2}
        assert sum(held.values()) + 14 == snaps[0].used_mib <= 24576 - 422
        assert {p.pid: p.used_mib for p in snaps[1].processes} == {me: math.ceil(24576 * 0.4), sleeper.pid: math.ceil(24576 * 0.4)}
        rows = sorted((p.gpu_uuid, p.pid, p.used_mib) for p in probe.processes())  # `c3 gpus --processes`
        assert rows == sorted((p.gpu_uuid, p.pid, p.used_mib) for s in snaps for p in s.processes)
    finally:
        sleeper.kill()
        sleeper.wait()
