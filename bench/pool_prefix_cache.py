#!/usr/bin/env python3
"""What stickiness buys on real engines: vLLM prefix-cache hit rate through `c3 pool`, sticky vs `--sticky none`.

    .venv/bin/python bench/pool_prefix_cache.py [--repeats 3] [--conversations 8] [--turns 4]

Two real vLLM replicas (CPU build, tiny dense model, scripts/rig/real_engines.py) behind `c3 pool serve`.
Workload (scripts/rig/prefix_workload.py): N conversations, each with its own ~600-token system prompt and
X-Session-ID, T turns each resending the whole history, turns interleaved across conversations. Hit rate =
Δ`vllm:prefix_cache_hits_total` / Δ`vllm:prefix_cache_queries_total` over both replicas. Each repeat uses
fresh conversation texts (no cross-run hits). Prints per-repeat rates, medians, the ratio and the load
average (the machine is shared and noisy; the rate does not depend on speed, only on routing).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.rig import real_engines  # noqa: E402
from scripts.rig.engine_procs import free_port, start_vllm  # noqa: E402
from scripts.rig.prefix_workload import conversation_hit_rate  # noqa: E402


def c3_env(home: Path) -> dict[str, str]:
    return {**os.environ, "C3_HOME": str(home / "home"), "C3_STATE": str(home / "state"), "PYTHONPATH": str(ROOT)}


def register(urls: dict[str, str], home: Path) -> None:
    for name, url in urls.items():
        subprocess.run([sys.executable, "-m", "c3", "node", "add", name, "--host", url, "--ssh", "bench@localhost"],
                       env=c3_env(home), capture_output=True, check=True)


@contextmanager
def vllm_replicas(prefix: str, names: tuple[str, ...] = ("a", "b"), max_model_len: int = 2048) -> Iterator[tuple[Path, dict[str, str]]]:
    """Real vLLM replicas (CPU build, tiny dense model; built first if need be), healthy and registered as
    c3 nodes in a scratch C3_HOME: yields (that scratch folder, {node: URL}); stops them on the way out.
    `max_model_len`: longer conversations need more than 2048 (the tiny models allow 4096)."""
    real_engines.build_all(print)
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        scratch = Path(tmp)
        model = real_engines.models_dir() / "dense"
        replicas = {}
        try:
            for name in names:
                replicas[name] = start_vllm(model, scratch / name, max_model_len=max_model_len)
            for proc in replicas.values():
                proc.wait_healthy(600)
            urls = {name: proc.url for name, proc in replicas.items()}
            register(urls, scratch)
            yield scratch, urls
        finally:
            for proc in replicas.values():
                proc.stop()


def start_pool(urls: dict[str, str], sticky: str, home: Path, log: Path, extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    env = c3_env(home)
    port = free_port()
    popen = subprocess.Popen([sys.executable, "-m", "c3", "pool", "serve", "--nodes", ",".join(urls), "--bind",
                              f"127.0.0.1:{port}", "--sticky", sticky, "--probe-interval", "0.5", *extra], env=env,
                             stdout=open(log, "wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(url + "/c3/health", timeout=1).close()
            return popen, url
        except OSError:
            time.sleep(0.25)
    popen.kill()
    raise RuntimeError(f"c3 pool serve did not start:\n{log.read_text()[-2000:]}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--conversations", type=int, default=8)
    ap.add_argument("--turns", type=int, default=4)
    args = ap.parse_args()
    load = os.getloadavg()[0]
    rates: dict[str, list[float]] = {"auto": [], "none": []}
    with vllm_replicas("c3-bench-prefix-") as (scratch, urls):
        for repeat in range(args.repeats):
            for sticky in ("auto", "none"):
                pool, url = start_pool(urls, sticky, scratch, scratch / f"pool-{sticky}-{repeat}.log")
                try:
                    rate = conversation_hit_rate(url, list(urls.values()), conversations=args.conversations,
                                                 turns=args.turns, tag=f"{sticky}{repeat}")
                finally:
                    pool.terminate()
                    pool.wait(30)
                rates[sticky].append(rate)
                print(f"repeat {repeat}: --sticky {sticky:4} hit rate {rate:.3f}", flush=True)
    sticky, spread = statistics.median(rates["auto"]), statistics.median(rates["none"])
    print(f"\nload average at start {load:.2f}; {args.conversations} conversations × {args.turns} turns, 2 replicas")
    print("| routing | hit rate per repeat | median |")
    print("|---|---|---|")
    for mode, label in (("auto", "c3 pool --sticky auto (X-Session-ID)"), ("none", "c3 pool --sticky none")):
        print(f"| {label} | {', '.join(f'{r:.3f}' for r in rates[mode])} | {statistics.median(rates[mode]):.3f} |")
    print(f"sticky ÷ none: {sticky / spread:.2f}×" if spread else "sticky ÷ none: n/a (no hits without stickiness)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
