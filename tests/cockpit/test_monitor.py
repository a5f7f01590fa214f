"""The cockpit as a monitor: history with a time axis kept under modals, the GPU process view, `/`
filter and sort in every list, the problems filter and `:` commands — on the real facade over the
simulated world (`tests.cockpit.world`)."""

from __future__ import annotations

import pytest

from tests.cockpit.conftest import real_app, screen_text, settle, wait_for


def gpu_points(app) -> int:
    """Readings of GPU0's utilisation the hub holds (read from the test, off the app's loop work)."""
    series = app.services.inner.real._hub.history.snapshot().get("gpu/0/util")
    return len(series.points) if series else 0


async def test_history_keeps_growing_while_a_modal_is_open(demo_world):
    app, _log = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, rounds=4)
        await pilot.press("question_mark")  # Help: a modal over the Orchestration screen
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "HelpModal", what="the help modal")
        before = gpu_points(app)
        await wait_for(pilot, lambda: gpu_points(app) >= before + 3, timeout=15, what="three more GPU readings recorded under the modal")
        await pilot.press("escape")
        await pilot.press("h")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "HistoryModal" and app.screen.reads > 0, what="the history view")
        await settle(pilot)
        text = screen_text(app)
        assert "-5m" in text and "now" in text, "no time axis"
        assert "GPU util" in text and "90 %" in text and " W" in text, text  # units and the busy GPU's reading
        assert "pod chat" in text and "KV cache" in text and "tok/s" in text
        await pilot.press("w")  # 5 m → 10 m
        assert "-10m" in screen_text(app)


@pytest.mark.parametrize("demo_world", ["mismatch"], indirect=True)
async def test_process_view_shows_the_misplaced_pod_on_the_gpu_it_uses_and_foreign_processes(demo_world):
    demo_world.add_stranger(3, 2048)
    app, _log = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, rounds=4)
        await pilot.press("p")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ProcessesModal" and app.screen.rows is not None, what="the process view")
        rows = {(r.gpu_index, r.pod) for r in app.screen.rows}
        assert (0, "odd") in rows, "the misplaced pod is not listed on GPU 0, where it runs"
        assert (1, "odd") not in rows, "the misplaced pod is listed on the GPU it planned"
        assert (3, None) in rows, "the stranger on GPU 3 is missing"
        text = screen_text(app)
        assert "⚠ odd (plans GPU1)" in text and "⚠ foreign" in text and "sleep 3600" in text
        assert "1 foreign" in text and "1 misplaced" in text
        # `/` filters the list, Esc clears it; `s` sorts by memory (second column)
        await pilot.press("slash", *"foreign", "enter")
        await settle(pilot)
        assert [r.pod for r in app.screen.shown] == [None]
        await pilot.press("escape")
        assert len(app.screen.shown) == len(app.screen.rows)
        await pilot.press("s", "s")
        used = [r.used_mib or 0 for r in app.screen.shown]
        assert used == sorted(used, reverse=True)
        await pilot.press("escape", "escape")  # clear the sort, then close
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "OrchestrationScreen", what="the modal closed")
