"""The half of the front-door contract that already holds (issue 13): these c3 modules reach the
backend only through backend.actions, backend.views, backend.models and backend.errors. Until the
whole of c3 does (then the contract in pyproject.toml replaces this and test_front_door.py), this
keeps them from sliding back.

`c3.demo` is listed although it is gone: the demo's world lives in backend/sim/demo.py and the
front ends reach it through backend.actions.session; a new c3.demo must not import past the door.
"""

from __future__ import annotations

import pytest

from tests.arch.test_front_door import side_doors

pytestmark = pytest.mark.static

GUARDED = (
    "c3", "c3.cli", "c3.cli.bootlog", "c3.cli.catalog", "c3.cli.fit", "c3.cli.gpus", "c3.cli.node", "c3.cli.pod", "c3.cli.pod_runtime",
    "c3.demo", "c3.look", "c3.modals.add_node", "c3.modals.logs", "c3.modals.new_pod", "c3.services_real",
)


def test_these_c3_modules_use_only_the_backends_front_door():
    doors = [d for d in side_doors() if d.split(" -> ")[0] in GUARDED]
    assert doors == [], f"{len(doors)} imports past the front door:\n" + "\n".join(doors)
