"""The cockpit's views at 80×24 over the real facade: the scrolled pod list keeps every pod's GPU lines,
views agree on a pod's state, and trouble toasts never cover an open modal."""

from __future__ import annotations

import pytest

from c3.screens.orchestration import PODS_PERIOD_S
from tests.cockpit.conftest import orchestration, real_app, settle


def _visible_lines(widget) -> list[str]:
    """What the widget really drew, line by line (its scroll position included)."""
    return [widget.render_line(y).text.rstrip() for y in range(widget.scrollable_content_region.height)]


@pytest.mark.parametrize("demo_world", ["bench", "mismatch"], indirect=True)
async def test_scrolled_pod_list_keeps_every_gpu_line_at_80x24(demo_world):
    """Issue 14: at 80 columns the pod list dropped GPU lines once it scrolled. Walk the sixteen pods with
    `j` to the bottom and `k` back: the highlighted pod is drawn whole (header and each of its GPU lines),
    and every pod header on screen is followed by its GPU lines unless the list's edge cuts it."""
    app, _ = real_app(demo_world)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = orchestration(app)
        pods = screen.query_one("#pods")
        shown = {p.name: p for p in screen.shown_pods()}
        assert len(shown) >= 3
        seen: set[str] = set()
        # `wait`: stay scrolled through two pod readings (new readings replace the options' text).
        keys = ["j"] * (len(shown) - 1) + ["wait"] + ["k"] * (len(shown) - 1) + ["wait"]
        for key in [None, *keys]:
            if key == "wait":
                await pilot.pause(2 * PODS_PERIOD_S + 0.5)
            elif key:
                await pilot.press(key)
                await pilot.pause()
            name = pods.selected_pod
            lines = _visible_lines(pods)
            heads = [i for i, line in enumerate(lines) if line.split(" ", 1)[0] in shown]
            assert any(lines[i].startswith(name + " ") for i in heads), (key, name, lines)
            for i in heads:
                pod = shown[lines[i].split(" ", 1)[0]]
                below = lines[i + 1:]
                ends = [j for j, line in enumerate(below) if not line.strip() or line.split(" ", 1)[0] in shown]
                block = below[: ends[0]] if ends else below
                cut = not ends  # the last pod on screen may run past the bottom edge
                if pod.name == name or not cut:
                    # Drawn whole: the option's text, every GPU line with its memory and utilisation.
                    prompt = pods.get_option(pod.name).prompt.plain
                    drawn = " ".join(" ".join([lines[i], *block]).split())
                    assert drawn == " ".join(prompt.split()), (key, pod.name, [lines[i], *block], prompt)
                    assert sum("─ GPU" in line for line in block) == prompt.count("─ GPU") >= len(pod.gpus), (key, pod.name, block)
                seen.add(pod.name)
        assert pods.selected_pod == next(iter(shown))
        assert seen == set(shown)
