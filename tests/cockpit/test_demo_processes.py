"""Every demo scenario's GPU processes are plausible: per card they add up to no more than the card's
used memory, and that to no more than the card has (the mismatch scene showed two 22,119 MiB processes
on a 24 GiB card)."""

from __future__ import annotations

import pytest

from tests.cockpit.world import SCENARIOS


@pytest.mark.parametrize("shared_world", SCENARIOS, indirect=True)
def test_process_memory_fits_each_card(shared_world):
    from backend.wiring import open_probe

    with shared_world.active():
        probe = open_probe(demo=True)
        snaps, rows = probe.snapshots(), probe.processes()
    for snap in snaps:
        held = [p.used_mib or 0 for p in snap.processes]
        assert sum(held) <= (snap.used_mib or 0) <= snap.gpu.total_mib - (snap.gpu.reserved_mib or 0), (shared_world.scenario, snap.gpu.index, held, snap.used_mib)
        listed = sorted(p.used_mib or 0 for p in rows if p.gpu_uuid == snap.gpu.uuid)
        assert listed == sorted(held)  # the process list says what the GPU panel says
    if shared_world.scenario == "mismatch":
        [gpu0] = [s for s in snaps if s.gpu.index == 0]
        assert len(gpu0.processes) == 2  # the misplaced pod's engine beside chat's, sharing what the card has
