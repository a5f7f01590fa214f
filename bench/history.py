"""Cost of the live history (`backend/live/history.py`) and of drawing it (`c3/modals/history.py`) at its
worst: 8 GPUs and 16 serving pods, every series full (10 minutes: 601 points each).

- record: the hub's threads append one GPU reading (8 GPUs × 3 series) every second and one metrics
  reading (16 pods × 4 series) every 2 s — the share of a core that takes;
- snapshot: copying every series for the history view (once every 2 s while it is open);
- render: building the view's text at 120 columns (same cadence);
- memory: the buffers' size (tracemalloc).

    .venv/bin/python bench/history.py [--repeats 7] [--n 50]

Process CPU time, medians of `--repeats` runs; the load average is printed beside (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.live.engine_metrics import EngineMetrics, PodMetrics  # noqa: E402
from backend.live.history import LiveHistory  # noqa: E402
from backend.models import Gpu, GpuSnapshot  # noqa: E402
from c3.modals.history import history_lines  # noqa: E402

GPUS = [Gpu(index=i, uuid=f"GPU-{i}", name="NVIDIA GeForce RTX 3090", total_mib=24576) for i in range(8)]
PODS = [f"pod-{i:02d}" for i in range(16)]
T0 = datetime(2026, 5, 1, 12, tzinfo=UTC)


def gpu_reading(second: int) -> list[GpuSnapshot]:
    at = T0 + timedelta(seconds=second)
    return [GpuSnapshot(gpu=g, taken_at=at, used_mib=12000 + second % 500, util_pct=second % 100, power_w=200.0 + second % 50) for g in GPUS]


def metrics_reading(second: int) -> dict[str, PodMetrics]:
    at = T0 + timedelta(seconds=second)
    return {p: PodMetrics(pod=p, metrics=EngineMetrics(engine="vllm", taken_at=at, running=second % 8, waiting=second % 3,
                                                       kv_cache_pct=float(second % 100), generation_tps=float(second % 700))) for p in PODS}


def per_call_ms(fn, n: int) -> float:
    started = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - started) / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--n", type=int, default=50)
    args = parser.parse_args()
    tracemalloc.start()
    history = LiveHistory(clock=lambda: (T0 + timedelta(seconds=1200)).timestamp())
    gpu_readings = [gpu_reading(s) for s in range(1200)]
    metric_readings = [metrics_reading(s) for s in range(0, 1200, 2)]
    base = tracemalloc.get_traced_memory()[0]
    for s in range(1200):
        history.record_gpus(gpu_readings[s])
        if s % 2 == 0:
            history.record_metrics(metric_readings[s // 2], pods=PODS)
    held_mib = (tracemalloc.get_traced_memory()[0] - base) / 2**20
    held_points = history.points()
    tracemalloc.stop()
    extra = iter(range(1200, 10**9))
    record_gpu, record_metrics, snapshot, render = [], [], [], []
    for _ in range(args.repeats):
        readings = [gpu_reading(next(extra)) for _ in range(args.n)]
        it = iter(readings)
        record_gpu.append(per_call_ms(lambda it=it: history.record_gpus(next(it)), args.n))
        mreadings = [metrics_reading(next(extra)) for _ in range(args.n)]
        mit = iter(mreadings)
        record_metrics.append(per_call_ms(lambda mit=mit: history.record_metrics(next(mit), pods=PODS), args.n))
        snapshot.append(per_call_ms(history.snapshot, args.n))
        view = history.snapshot()
        render.append(per_call_ms(lambda view=view: history_lines(view, window_s=600.0, width=112), max(5, args.n // 5)))
    med = statistics.median
    share = (med(record_gpu) / 1000 / 1.0 + med(record_metrics) / 1000 / 2.0) * 100
    open_share = (med(snapshot) + med(render)) / 1000 / 2.0 * 100
    print(f"load average {os.getloadavg()[0]:.2f} · {len(GPUS)} GPUs, {len(PODS)} pods, {held_points} points held (10 min), {held_mib:.1f} MiB")
    print(f"{'step':<34}{'ms (median)':>12}{'cadence':>10}{'% of a core':>13}")
    print(f"{'record one GPU reading (8 GPUs)':<34}{med(record_gpu):>12.3f}{'1 s':>10}{med(record_gpu) / 10:>13.3f}")
    print(f"{'record one metrics reading (16)':<34}{med(record_metrics):>12.3f}{'2 s':>10}{med(record_metrics) / 20:>13.3f}")
    print(f"{'snapshot (every series)':<34}{med(snapshot):>12.3f}{'2 s':>10}{med(snapshot) / 20:>13.3f}")
    print(f"{'render the view at 120 columns':<34}{med(render):>12.3f}{'2 s':>10}{med(render) / 20:>13.3f}")
    print(f"recording always: {share:.3f} % of a core; the view open adds {open_share:.2f} %")


if __name__ == "__main__":
    main()
