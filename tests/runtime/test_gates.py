"""Gates before up: VRAM (with retry), port, GPUs held; --force turns refusals into warnings."""

from __future__ import annotations

import socket

import pytest

from backend.errors import Refused
from backend.models import CatalogEntry, ComputeProcess, Gpu
from backend.runtime.gates import enforce, gpus_gate, port_gate, port_in_use, vram_gate
from backend.runtime.models import Workload

GPUS = [Gpu(index=i, uuid=f"GPU-{i}", name="NVIDIA GeForce RTX 3090", total_mib=24576) for i in range(3)]
ENTRY = CatalogEntry(slug="vllm/qwen3-8b", engine="vllm", image="x", model="Qwen/Qwen3-8B", gpu_memory_utilization=0.9)


def reserve(entry, gpu):
    return 22118


class FakeFree:
    """A free-memory probe whose readings follow a script; the last reading repeats once it runs out."""

    def __init__(self, *readings: dict[str, int | None]) -> None:
        self.readings = list(readings)
        self.calls = 0

    def __call__(self) -> dict[str, int | None]:
        reading = self.readings[min(self.calls, len(self.readings) - 1)]
        self.calls += 1
        return reading


def test_vram_gate_refuses_naming_gpu_and_shortfall():
    sleeps = []
    probe = FakeFree({"GPU-0": 24000, "GPU-1": 3000})
    result = vram_gate(slug=ENTRY.slug, gpus=GPUS[:2], entry=ENTRY, read_free=probe, reservation=reserve, attempts=3, sleep=sleeps.append)
    assert not result.ok
    assert "GPU 1 (NVIDIA GeForce RTX 3090) has 2.9 GiB free but vllm/qwen3-8b reserves 21.6 GiB there" in result.message
    assert "short by 18.7 GiB, 19118 MiB" in result.message
    assert "GPU 0" not in result.message


def test_vram_gate_refuses_a_steady_shortfall_after_the_second_reading():
    sleeps = []
    probe = FakeFree({"GPU-0": 24000, "GPU-1": 3000})
    result = vram_gate(slug="s", gpus=GPUS[:2], entry=ENTRY, read_free=probe, reservation=reserve, attempts=5, interval_s=2.0, sleep=sleeps.append)
    assert not result.ok and "GPU 1" in result.message
    # One look again (memory lags a container that just stopped), then refused: ~2 s, not 8 s.
    assert probe.calls == 2 and sleeps == [2.0]


def test_vram_gate_refuses_when_free_memory_falls():
    probe = FakeFree({"GPU-0": 9000}, {"GPU-0": 5000}, {"GPU-0": 23000})
    sleeps = []
    result = vram_gate(slug="s", gpus=GPUS[:1], entry=ENTRY, read_free=probe, reservation=reserve, attempts=5, sleep=sleeps.append)
    assert not result.ok and "has 4.9 GiB free" in result.message  # the last reading is the one reported
    assert probe.calls == 2 and len(sleeps) == 1


def test_vram_gate_keeps_retrying_while_free_memory_rises():
    # The driver hands back a stopped engine's memory in steps: each reading is higher, the last is enough.
    probe = FakeFree({"GPU-0": 1000}, {"GPU-0": 6000}, {"GPU-0": 14000}, {"GPU-0": 20000}, {"GPU-0": 23000})
    sleeps = []
    result = vram_gate(slug="s", gpus=GPUS[:1], entry=ENTRY, read_free=probe, reservation=reserve, attempts=5, interval_s=0.5, sleep=sleeps.append)
    assert result.ok and probe.calls == 5 and sleeps == [0.5] * 4


def test_vram_gate_treats_a_few_mib_of_jitter_as_steady():
    probe = FakeFree({"GPU-0": 3000}, {"GPU-0": 3008}, {"GPU-0": 23000})
    result = vram_gate(slug="s", gpus=GPUS[:1], entry=ENTRY, read_free=probe, reservation=reserve, attempts=5, sleep=lambda s: None)
    assert not result.ok and probe.calls == 2


def test_vram_gate_rising_then_stalled_is_refused_at_the_stall():
    probe = FakeFree({"GPU-0": 1000}, {"GPU-0": 6000}, {"GPU-0": 6000}, {"GPU-0": 23000})
    sleeps = []
    result = vram_gate(slug="s", gpus=GPUS[:1], entry=ENTRY, read_free=probe, reservation=reserve, attempts=5, sleep=sleeps.append)
    assert not result.ok and probe.calls == 3 and len(sleeps) == 2


def test_vram_gate_retries_while_any_card_still_rises():
    # Two cards of one stopped tensor-parallel engine: GPU-1 is released a reading later than GPU-0.
    lagging = FakeFree({"GPU-0": 1000, "GPU-1": 1000}, {"GPU-0": 23000, "GPU-1": 1000}, {"GPU-0": 23000, "GPU-1": 23000})
    assert vram_gate(slug="s", gpus=GPUS[:2], entry=ENTRY, read_free=lagging, reservation=reserve, attempts=5, sleep=lambda s: None).ok
    assert lagging.calls == 3
    # GPU-0 came back but GPU-1 stays held: refused at the first reading where nothing rose.
    held = FakeFree({"GPU-0": 1000, "GPU-1": 1000}, {"GPU-0": 23000, "GPU-1": 1000}, {"GPU-0": 23000, "GPU-1": 1000},
                    {"GPU-0": 23000, "GPU-1": 23000})
    result = vram_gate(slug="s", gpus=GPUS[:2], entry=ENTRY, read_free=held, reservation=reserve, attempts=5, sleep=lambda s: None)
    assert not result.ok and held.calls == 3 and "GPU 1" in result.message and "GPU 0" not in result.message


def test_vram_gate_stops_at_the_attempt_cap_even_while_rising():
    probe = FakeFree(*({"GPU-0": 1000 + 100 * i} for i in range(10)))
    sleeps = []
    result = vram_gate(slug="s", gpus=GPUS[:1], entry=ENTRY, read_free=probe, reservation=reserve, attempts=4, sleep=sleeps.append)
    assert not result.ok and probe.calls == 4 and len(sleeps) == 3  # no sleep after the last reading


def test_vram_gate_passes_once_memory_is_released():
    reads = iter([{"GPU-0": 1000}, {"GPU-0": 23000}])
    result = vram_gate(slug="s", gpus=GPUS[:1], entry=ENTRY, read_free=lambda: next(reads), reservation=reserve, attempts=5, sleep=lambda s: None)
    assert result.ok


def test_vram_gate_real_sleep_uses_the_injected_interval():
    import time

    probe = FakeFree({"GPU-0": 1000})
    begun = time.monotonic()
    result = vram_gate(slug="s", gpus=GPUS[:1], entry=ENTRY, read_free=probe, reservation=reserve, attempts=5, interval_s=0.01)
    assert not result.ok and probe.calls == 2
    assert time.monotonic() - begun < 5  # default sleep, tiny interval: refused without the old 4 x 2 s


def test_vram_gate_skips_what_it_cannot_judge():
    result = vram_gate(slug="s", gpus=GPUS[:1], entry=ENTRY, read_free=lambda: {"GPU-0": None}, reservation=lambda e, g: None, attempts=1)
    assert result.ok


def test_port_gate_sees_a_real_listener_and_a_running_pod():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert port_in_use(port, "127.0.0.1")
        result = port_gate(port=port, workloads=[], in_use=lambda p: port_in_use(p, "127.0.0.1"))
        assert not result.ok and f"port {port} is already in use" in result.message
    assert not port_in_use(port, "127.0.0.1")
    held = port_gate(port=8080, workloads=[Workload(pod="coder", status="running", host_port=8080)], in_use=lambda p: False)
    assert not held.ok and "held by running pod coder" in held.message
    assert port_gate(port=8080, workloads=[Workload(pod="coder", status="exited", host_port=8080)], in_use=lambda p: False).ok


def test_gpus_gate_names_other_pod_and_stranger():
    workloads = [Workload(pod="coder", status="running", gpu_uuids=("GPU-1",)), Workload(pod="old", status="exited", gpu_uuids=("GPU-0",))]
    procs = [ComputeProcess(pid=4242, gpu_uuid="GPU-0", used_mib=812), ComputeProcess(pid=1, gpu_uuid="GPU-2")]
    result = gpus_gate(pod="chat", gpus=GPUS[:2], workloads=workloads, processes=procs, owners={})
    assert not result.ok
    assert "GPU 1 claimed by running pod coder" in result.message
    assert "GPU 0 held by pid 4242 (a process c3 did not start, 812 MiB)" in result.message
    assert "GPU 2" not in result.message
    assert gpus_gate(pod="chat", gpus=GPUS[2:], workloads=workloads, processes=[], owners={}).ok


def test_enforce_refuses_in_one_line_or_warns_with_force():
    bad = [port_gate(port=1, workloads=[Workload(pod="a", status="running", host_port=1)], in_use=lambda p: False)]
    with pytest.raises(Refused) as error:
        enforce("chat", bad, force=False)
    assert error.value.message.startswith("pod chat cannot start: port 1 is held by running pod a")
    assert "\n" not in error.value.message
    warnings = enforce("chat", bad, force=True)
    assert len(warnings) == 1 and warnings[0].forced
    assert enforce("chat", [port_gate(port=1, workloads=[], in_use=lambda p: False)], force=False) == []
