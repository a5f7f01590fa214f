"""CPU cost of reading one engine's /metrics body: the full prometheus_client parse vs c3's parse, which
hands the parser only the ~40 lines it reads (`backend/live/engine_metrics.py`). The live hub parses one
body per serving pod every 2 s, so cost × 16 pods / 2 s is the share of a core the metrics poller takes.

    .venv/bin/python bench/engine_metrics.py [--repeats 7] [--n 200]

Bodies: the real engines' recorded /metrics (tests/fixtures/engines/). Process CPU time, medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from backend.live.engine_metrics import parse

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "engines"


def per_call_ms(fn, n: int) -> float:
    started = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - started) / n * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}; {args.repeats} repeats × {args.n} parses, medians")
    print(f"{'body':34} {'bytes':>7} {'full parse ms':>14} {'c3 parse ms':>12} {'ratio':>6} {'c3: 16 pods/2 s, % core':>24}")
    for name in ("vllm-0.32.0-cpu.metrics.txt", "llama-server-0.3.36.metrics.txt"):
        text = (FIXTURES / name).read_text()
        full = statistics.median(per_call_ms(lambda text=text: [f for f in text_string_to_metric_families(text)], args.n) for _ in range(args.repeats))
        ours = statistics.median(per_call_ms(lambda text=text: parse(text, taken_at=datetime.now(UTC), clock=1.0), args.n) for _ in range(args.repeats))
        print(f"{name:34} {len(text):>7} {full:>14.3f} {ours:>12.3f} {full / ours:>6.1f} {ours * 16 / 2000 * 100:>23.2f}%")


if __name__ == "__main__":
    main()
