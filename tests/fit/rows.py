"""Read one row of the public boot-log data (bench/data/bootlogs-*.yaml) by id, for tests that cite it."""

from __future__ import annotations

from pathlib import Path

import yaml

DATA = Path(__file__).resolve().parents[2] / "bench" / "data"


def boot_row(point_id: str) -> dict:
    """The calibration or validation row `point_id` (KeyError when neither file has it)."""
    for name in ("bootlogs-calibration.yaml", "bootlogs-validation.yaml"):
        for p in yaml.safe_load((DATA / name).read_text())["points"]:
            if p["id"] == point_id:
                return p
    raise KeyError(point_id)
