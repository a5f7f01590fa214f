"""Render-only widgets and pure helpers: bars, sparklines, badges, the pod view, the fit breakdown;
GPU panels for 1 to 16 GPUs at 80×24 and 120×40 (they scroll, never overlap)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from textual.app import App
from textual.containers import VerticalScroll

from backend.models import FitReport, Gpu, GpuFit, GpuSnapshot
from backend.sim.probe import DEMO_RIG, derive_uuid
from c3.screens.pod_view import badge, free_line, pod_prompt
from c3.services import History, PodState
from widgets.fit_breakdown import fit_lines, verdict_markup
from widgets.gpu_panel import GpuPanel, short_name
from widgets.meters import bar, level_style, sparkline
from widgets.source_badge import source_badge

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)


def _gpu(index: int) -> Gpu:
    """GPU `index` with the demo rig's cards, repeated past its four."""
    card = DEMO_RIG.gpus[index % len(DEMO_RIG.gpus)]
    return Gpu(index=index, uuid=derive_uuid(index, card.name), name=card.name, total_mib=card.total_mib, sm=card.sm)


def snap(index: int, used: int = 20000, util: int = 50) -> GpuSnapshot:
    return GpuSnapshot(gpu=_gpu(index), taken_at=NOW, used_mib=used, free_mib=24576 - used, util_pct=util, temp_c=60, power_w=250, power_limit_w=350)


def test_bar_and_levels():
    assert level_style(10) == "$success" and level_style(85) == "$warning" and level_style(99) == "$error"
    assert bar(50, 10).count("█") == 5 and bar(50, 10).count("░") == 5
    assert bar(150, 4).count("█") == 4 and bar(-5, 4).count("░") == 4


def test_sparkline_is_right_aligned_and_bounded():
    assert sparkline([], 4) == "    "
    assert sparkline([0, 100], 4) == "  ▁█"
    assert len(sparkline(list(range(100)), 10)) == 10
    assert sparkline([50] * 3, 3) == "▅▅▅" or sparkline([50] * 3, 3) == "▄▄▄"


def test_history_is_bounded():
    history = History(maxlen=5)
    for _ in range(20):
        history.add([snap(0)])
    assert len(history.util[0]) == 5 and len(history.mem[0]) == 5


def test_source_badge_states():
    assert "●" in source_badge("GPUs", NOW, NOW, stale_after_s=5).plain
    assert "⚠ STALE" in source_badge("GPUs", NOW, NOW + timedelta(seconds=9), stale_after_s=5).plain
    assert "⚠ STALE" in source_badge("GPUs", NOW, NOW, stale_after_s=5, error="boom").plain
    assert "⏸ paused" in source_badge("GPUs", NOW, NOW + timedelta(seconds=60), stale_after_s=5, paused=True).plain
    assert "loading" in source_badge("GPUs", None, NOW, stale_after_s=5).plain
    assert "no data" in source_badge("GPUs", None, NOW, stale_after_s=5, error="nvml").plain


def test_pod_view_text():
    gpus = {0: snap(0), 1: snap(1), 2: snap(2), 3: snap(3)}
    placed = PodState("chat", "vllm/x", 8000, (0,), "serving", "ok", "", (0,))
    wrong = PodState("coder", "vllm/y", 8010, (1, 2), "serving", "mismatch", "not on requested GPU 2", (1, 3))
    assert "✓ placed" in badge(placed) and "PLACEMENT MISMATCH" in badge(wrong)
    text = pod_prompt(wrong, gpus).plain
    assert text.splitlines()[0].startswith("coder  vllm/y:8010  ● serving  ⚠ PLACEMENT MISMATCH")
    assert "not on requested GPU 2" in text and "├─ GPU1" in text
    # Seen on GPU 3, which it does not claim: listed there too; GPU 2, claimed but not used, says so.
    assert "├─ GPU2 RTX 5090  19.5/31.8G · util 50%  (claimed, unused)" in text and "└─ GPU3 RTX 5090  19.5/31.8G · util 50%  ⚠ runs here" in text
    assert free_line([placed, wrong], gpus, {3: "coder"}).plain == "free: GPU3 (in use: coder)"
    assert "none" in free_line([PodState("all", "s", 1, (0, 1, 2, 3))], gpus).plain


def test_fit_breakdown():
    report = FitReport(
        verdict="tight", kv_cache_tokens=1000, max_concurrency=0.5, max_model_len=2000, max_model_len_fits=1000, available_kv_gib=0.4,
        gpus=[GpuFit(index=0, total_gib=23.6, budget_gib=21.2, weights_gib=18, activation_gib=1, non_torch_gib=0.5, cudagraph_gib=0.3, available_kv_gib=0.4)],
        reasons=["only 0.40 GiB [left]"],
    )
    text = fit_lines(report).plain
    assert "fit ◐ tight" in text and "GPU0" in text and "only 0.40 GiB [left]" in text
    assert "✗ wont-fit" in verdict_markup("wont-fit")
    assert "choose" in fit_lines(None).plain


def test_short_names():
    assert short_name("NVIDIA GeForce RTX 3090") == "RTX 3090" and short_name("NVIDIA H100 80GB HBM3") == "H100 80GB HBM3"


class Panels(App):
    def __init__(self, count: int) -> None:
        super().__init__()
        self.count = count

    def compose(self):
        with VerticalScroll(id="gpus"):
            for i in range(self.count):
                yield GpuPanel(i, id=f"gpu-{i}")

    def on_mount(self) -> None:
        for panel in self.query(GpuPanel):
            panel.show(snap(panel.index, util=10 * panel.index % 100), [float(i) for i in range(30)], [50.0] * 30, f"pod-{panel.index}")


@pytest.mark.parametrize("count", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_gpu_panels_never_overlap_and_scroll(count, size):
    app = Panels(count)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        panels = list(app.query(GpuPanel))
        regions = [p.virtual_region for p in panels]
        for a, b in zip(regions, regions[1:], strict=False):
            assert a.bottom <= b.y, "panels overlap"
        for panel in panels:
            lines = panel.render().plain.splitlines()
            assert len(lines) == 3 and all(len(line) <= max(30, panel.size.width) for line in lines)
            assert lines[0].startswith(f"GPU{panel.index} ")
        scroll = app.query_one(VerticalScroll)
        assert (scroll.virtual_size.height > scroll.size.height) == (count * 4 > size[1])
