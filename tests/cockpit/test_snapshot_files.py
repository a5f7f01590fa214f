"""Every stored SVG snapshot belongs to a scene.

Run serially, syrupy fails a run that leaves a snapshot unused (a scene renamed or removed, its old
picture left behind); under pytest-xdist it skips that check (each worker sees only its own tests),
so this test keeps it for every way the suite runs.
"""

from __future__ import annotations

from pathlib import Path

from tests.cockpit.scenes import SCENES

SNAPSHOTS = Path(__file__).with_name("__snapshots__") / "test_snapshots"


def test_every_stored_snapshot_is_a_scene():
    expected = {f"test_scene[{scene.name}].svg" for scene in SCENES}
    stored = {path.name for path in SNAPSHOTS.iterdir()}
    assert stored - expected == set(), "snapshots of no scene (delete them, or name the scene back)"
