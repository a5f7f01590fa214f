"""Under --readonly the write keys are dimmed in the key bar (pressing one still says why); the read
keys stay bright, and without --readonly nothing is dimmed."""

from __future__ import annotations

import pytest

from c3.app import C3App
from tests.cockpit.conftest import settle
from tests.cockpit.scenes import converged
from widgets.key_bar import KeyBar


def styles(app) -> dict[str, str]:
    """Each key label in the bar → the style it is drawn with."""
    content = app.screen.query_one(KeyBar).render()
    out = {}
    for span in content.spans:
        out[content.plain[span.start:span.end]] = str(span.style)
    return out


@pytest.mark.parametrize("shared_world", ["empty"], indirect=True)  # no pods: no fixed ports to wait for
@pytest.mark.parametrize("readonly", [True, False])
async def test_write_keys_are_dimmed_only_under_readonly(shared_world, readonly):
    svc = shared_world.services(readonly=readonly)
    converged(svc)
    app = C3App(svc, readonly=readonly, clock=svc.clock, autopoll=False, live=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        keys = styles(app)
        dim = {k for k, style in keys.items() if "disabled" in style}
        assert {"l", "?", "q"}.isdisjoint(dim)  # reads and quit stay bright
        assert dim == ({"n", "u", "d", "x", "o"} if readonly else set()), keys
        await pilot.press("2")
        await settle(pilot)
        dim = {k for k, style in styles(app).items() if "disabled" in style}
        assert dim == ({"a", "x", "D"} if readonly else set())
        await pilot.press("3")
        await settle(pilot)
        dim = {k for k, style in styles(app).items() if "disabled" in style}
        assert dim == ({"u", "d", "R", "P"} if readonly else set())
