"""List keys: `j`/`k` move in the Nodes and Recipes tables as Help says, and the pod list (where `x`
removes the highlighted pod) stops at its ends instead of wrapping — `j j x` on the last pod must
never land on the first."""

from __future__ import annotations

from c3.app import C3App
from tests.cockpit.conftest import orchestration, settle, wait_for
from tests.cockpit.scenes import converged
from widgets.nav_table import NavTable


async def test_the_pod_list_does_not_wrap_and_tables_take_j_k(shared_world):
    svc = shared_world.services()
    converged(svc)
    app = C3App(svc, clock=svc.clock, autopoll=False, live=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        orch = orchestration(app)
        await wait_for(pilot, lambda: [p.name for p in orch.pods] == ["chat", "coder"], what="both pods listed")
        pods = orch.query_one("#pods")
        pods.focus()
        await settle(pilot)
        assert pods.selected_pod == "chat"
        await pilot.press("k")
        assert pods.selected_pod == "chat"  # the first pod stays (it used to wrap to the last)
        await pilot.press("j", "j")  # an even count: with two pods, a wrap lands back on the first
        assert pods.selected_pod == "coder"  # the last pod stays (it used to wrap to the first)
        await pilot.press("up")
        assert pods.selected_pod == "chat"
        # Recipes: j/k move the row cursor like the arrows.
        await pilot.press("3")
        await settle(pilot)
        table = app.screen.query_one("#recipes", NavTable)
        await wait_for(pilot, lambda: table.row_count >= 3, what="the recipe library")
        table.focus()
        table.move_cursor(row=0)
        await pilot.press("j", "j")
        assert table.cursor_row == 2
        await pilot.press("k")
        assert table.cursor_row == 1
        # Nodes: the same table class, so the same keys.
        await pilot.press("2")
        await settle(pilot)
        assert isinstance(app.screen.query_one("#nodes"), NavTable)
