"""The Nodes screen's model-cache pane over the real facade on the demo's `cluster` world: this machine's
Hugging Face cache and `~/models` (tests/cockpit/world.py lays them out) read in a worker, an unreachable
node said as such without holding up the rest of the screen."""

from __future__ import annotations

import pytest

from tests.cockpit.conftest import real_app, screen_text, settle, wait_for

SHARED_CLUSTER = pytest.mark.parametrize("shared_world", ["cluster"], indirect=True)


@SHARED_CLUSTER
async def test_the_highlighted_nodes_model_cache_is_in_the_side_pane(shared_world):
    app, svc = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await wait_for(pilot, lambda: None not in (getattr(pilot.app.screen, "caches", None), getattr(pilot.app.screen, "rows", None)),
                       timeout=30, what="nodes and caches read")
        await settle(pilot)
        screen = pilot.app.screen
        assert "node_caches" in svc.calls  # through the facade, in a worker (the loop-guard test covers every call)
        text = screen_text(app)
        # 16,381,470,720 + 19,325,298,688 + 18,550,716,416 bytes: the weights.csv sizes the world's files have.
        assert "cache 3 models · 50.5 GiB" in text, text
        assert "Qwen/Qwen3-32B-AWQ" in text and "Qwen3-30B-A3B-Q4_K_M.gguf" in text and "Qwen/Qwen3-8B" in text
        assert [text.count(size) for size in ("18.0G", "17.3G", "15.3G")] == [1, 1, 1]
        table = screen.query_one("#nodes")
        table.focus()
        table.move_cursor(row=table.get_row_index("spark-2"))
        await settle(pilot)
        assert "cache node not reachable" in screen_text(app)
