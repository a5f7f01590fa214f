"""SVG snapshots pin every screen and modal (the same scenes `scripts/screenshots.py` renders): the real
facade over the simulated world `c3 demo` runs (`tests.cockpit.world`).

Update after looking at the report: `pytest tests/cockpit/test_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

import pytest

from tests.cockpit.scenes import SCENES, Worlds, play, scene_app


@pytest.fixture(scope="module")
def worlds():
    """One world per run of same-scenario scenes; every stub process stopped at the end."""
    keeper = Worlds()
    try:
        yield keeper
    finally:
        keeper.close()


@pytest.mark.parametrize("scene", SCENES, ids=[s.name for s in SCENES])
def test_scene(scene, snap_compare, worlds):
    async def run_before(pilot) -> None:
        await play(scene, pilot)

    with scene_app(scene, worlds) as app:
        assert snap_compare(app, terminal_size=scene.size, run_before=run_before)
