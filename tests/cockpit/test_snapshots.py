"""SVG snapshots pin every screen and modal (the same scenes `scripts/screenshots.py` renders).

Update after looking at the report: `pytest tests/cockpit/test_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

import pytest

from c3.demo_scenes import SCENES, play, scene_app


@pytest.mark.parametrize("scene", SCENES, ids=[s.name for s in SCENES])
def test_scene(scene, snap_compare):
    async def run_before(pilot) -> None:
        await play(scene, pilot)

    assert snap_compare(scene_app(scene), terminal_size=scene.size, run_before=run_before)
