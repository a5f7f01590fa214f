"""The c3 modules that already reach the backend only through its front door (backend.actions,
backend.views, backend.models, backend.errors) stay that way, while `test_front_door.py` still
expects the rest to break it. Grow this list as modules are moved; once every c3 module is on it,
the contract in pyproject.toml takes over and this file goes."""

from __future__ import annotations

import pytest

from tests.arch.test_front_door import side_doors

pytestmark = pytest.mark.static

THROUGH_THE_FRONT_DOOR = (
    "c3.cli.pool", "c3.cli.recipes", "c3.cli.profile", "c3.cli.serve", "c3.cli.shard", "c3.cli.spark",
    "c3.services_cluster", "c3.services_plans",
)


def test_these_modules_use_only_the_backends_front_door():
    doors = [d for d in side_doors() if d.split(" -> ")[0] in THROUGH_THE_FRONT_DOOR]
    assert doors == [], f"{len(doors)} imports past the front door:\n" + "\n".join(doors)
