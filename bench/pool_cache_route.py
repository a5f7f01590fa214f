#!/usr/bin/env python3
"""Cache-aware routing on real engines: c3 `--route cache` beside c3's other modes, sglang-router and
vllm-router, on the same vLLM replicas and the same shared-system-prompt, multi-turn workload.

    .venv/bin/python bench/pool_cache_route.py [--repeats 3] [--replicas 2] [--conversations 8] [--turns 4] [--concurrency 2]
        [--max-model-len 2048]

`--replicas` real vLLM replicas (CPU build, tiny dense model, scripts/rig/real_engines.py), started once. Each router
in turn is put in front of them and runs `scripts/rig/prefix_workload.shared_prompt_conversations`: N
conversations sharing ONE ~560-token system prompt (fresh text of the same length per router and
repeat, so no run hits another's blocks and all runs have the same token counts), each with its own X-Session-ID, T streamed turns of ~110 new user tokens each, sent
in waves `--concurrency` at a time. Per router: hit rate = Δ`vllm:prefix_cache_hits_total` ÷
Δ`vllm:prefix_cache_queries_total` over all replicas (the engines' own counters), median over repeats;
% answered (a full stream ending in [DONE]); TTFT p50 (client side, all repeats pooled); requests each
replica finished (Δ`vllm:request_success_total`, all repeats summed) and the share of prompt tokens the
busier replica got; hit rate ÷ the round-robin stand-in's (`--sticky none`: least in
flight, ties at random). `c3 --route cache --cache-balance-abs 64` (sglang-router's default absolute
threshold, so at these loads the balance bound never trips) shows what the bound costs in hits and buys in
balance. `c3 --route cache --cache-load in-flight` is the bound by the router's own in-flight counts alone (the
default before the engines' queues were read). Routers run in a rotating order each repeat (no router always goes first). Last, the workload's
ceiling for the same replicas × conversations × turns (`bench/pool_cache_bound.py`, run with the rig's vLLM
venv, which has `tokenizers`): the hit rate with everything on one replica, and random placement's.
Peers come from `.rig/bench-venv` (`python3 -m venv .rig/bench-venv && .rig/bench-venv/bin/pip install
sglang-router vllm-router`); one that is missing or does not start is reported with the reason.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.peers import BENCH_VENV, Procs, wait_http  # noqa: E402
from bench.pool_prefix_cache import start_pool, vllm_replicas  # noqa: E402
from scripts.rig.engine_procs import free_port  # noqa: E402
from scripts.rig.prefix_workload import SharedPromptRun, shared_prompt_conversations  # noqa: E402
from scripts.rig.real_engines import vllm_python  # noqa: E402

C3 = {
    "c3 --route cache": ("--route", "cache"),
    "c3 --route cache --sticky none": ("--route", "cache", "--sticky", "none"),
    "c3 --route cache --cache-balance-abs 64": ("--route", "cache", "--cache-balance-abs", "64"),
    "c3 --route cache --cache-load in-flight": ("--route", "cache", "--cache-load", "in-flight"),
    "c3 --sticky auto": ("--sticky", "auto"),
    "c3 --sticky none": ("--sticky", "none"),
}
PEERS = {
    "sglang-router cache_aware": ("sglang-router", "cache_aware"),
    "vllm-router cache_aware": ("vllm-router", "cache_aware"),
    "vllm-router round_robin": ("vllm-router", "round_robin"),
}
BASELINE = "c3 --sticky none"


def start_peer(exe_name: str, policy: str, urls: list[str], procs: Procs, log: Path) -> tuple[object | None, str, str]:
    """(process, router URL, '') or (None, '', why it cannot run)."""
    exe = BENCH_VENV / "bin" / exe_name
    if not exe.exists():
        return None, "", f"{exe_name} not installed in {BENCH_VENV} (pip install {exe_name} there)"
    port, metrics = free_port(), free_port()
    argv = [str(exe)] + (["launch"] if exe_name == "sglang-router" else [])
    argv += ["--host", "127.0.0.1", "--port", str(port), "--worker-urls", *urls, "--policy", policy,
             "--prometheus-port", str(metrics), "--log-level", "warn" if exe_name == "sglang-router" else "warning"]
    proc = procs.start(argv, {0, 1}, log)
    url = f"http://127.0.0.1:{port}"
    for path in ("/health", "/v1/models"):
        if wait_http(url + path, 60, proc):
            return proc, url, ""
        if proc.poll() is not None:
            break
    tail = log.read_text(errors="replace")[-600:] if log.exists() else ""
    return None, "", f"{exe_name} --policy {policy} did not answer within 60 s (exit {proc.poll()}): {tail!r}"


def one_run(name: str, repeat: int, names: list[str], args: argparse.Namespace, urls: dict[str, str], scratch: Path,
            procs: Procs, why_not: dict[str, str]) -> SharedPromptRun | None:
    """The workload once through router `name` (started for it, stopped after); None, with the reason in
    `why_not`, for a peer that cannot run here."""
    slug = "".join(ch if ch.isalnum() else "-" for ch in name)
    log = scratch / f"{slug}-{repeat}.log"
    pool = None
    if name in C3:
        pool, url = start_pool(urls, "auto", scratch, log, extra=C3[name])
    else:
        proc, url, why = start_peer(*PEERS[name], list(urls.values()), procs, log)
        if proc is None:
            why_not[name] = why
            print(f"{name}: cannot run: {why}", flush=True)
            return None
    try:
        return shared_prompt_conversations(url, list(urls.values()), conversations=args.conversations, turns=args.turns,
                                           concurrency=args.concurrency, tag=f"r{names.index(name):02d}-{repeat}-{os.getpid()}")
    finally:
        if pool is not None:
            pool.terminate()
            pool.wait(30)
        procs.stop_all()


def replica_names(n: int) -> tuple[str, ...]:
    """Node names a, b, c, … (the names `c3 node add` registers and the order the per-replica columns use)."""
    return tuple(chr(ord("a") + i) for i in range(n))


def mem_available_gib() -> float:
    """MemAvailable from /proc/meminfo: how much room the replicas left (each CPU vLLM holds its KV space)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    return float("nan")


def ceiling(args: argparse.Namespace) -> str:
    """bench/pool_cache_bound.py's output for this exact workload (replicas × conversations × turns), run with the
    rig's vLLM venv (it has `tokenizers`); its failure is reported, not raised — the measured rows stand alone."""
    argv = [str(vllm_python()), str(ROOT / "bench" / "pool_cache_bound.py"), "--replicas", str(args.replicas),
            "--conversations", str(args.conversations), "--turns", str(args.turns), "--samples", "300"]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    return done.stdout.strip() if done.returncode == 0 else f"pool_cache_bound.py failed (exit {done.returncode}): {done.stderr[-400:]}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--replicas", type=int, default=2, help="vLLM replicas behind every router (each holds 1 GiB of KV space)")
    ap.add_argument("--max-model-len", type=int, default=2048,
                    help="each replica's context; 6 turns of this workload need 4096 (the last prompt is ~2,450 tokens)")
    ap.add_argument("--conversations", type=int, default=8)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--routers", default=",".join([*C3, *PEERS]), help="comma-separated row names")
    args = ap.parse_args()
    names = [n.strip() for n in args.routers.split(",") if n.strip()]
    unknown = [n for n in names if n not in C3 and n not in PEERS]
    if unknown:
        ap.error(f"unknown routers {unknown}; known: {[*C3, *PEERS]}")
    if not 1 <= args.replicas <= 26:
        ap.error("--replicas must be 1 to 26")
    runs: dict[str, list[SharedPromptRun]] = {n: [] for n in names}
    loads: dict[str, list[float]] = {n: [] for n in names}
    why_not: dict[str, str] = {}
    procs = Procs()
    booting = time.monotonic()
    with vllm_replicas("c3-bench-cacheroute-", replica_names(args.replicas), args.max_model_len) as (scratch, urls):
        print(f"{args.replicas} vLLM replicas healthy after {time.monotonic() - booting:.0f} s; MemAvailable "
              f"{mem_available_gib():.1f} GiB; load average {os.getloadavg()[0]:.2f}", flush=True)
        load_start = os.getloadavg()
        started = time.monotonic()
        try:
            for repeat in range(args.repeats):
                order = names[repeat % len(names):] + names[:repeat % len(names)]
                for name in order:
                    if name not in why_not:
                        run = one_run(name, repeat, names, args, urls, scratch, procs, why_not)
                        if run is not None:
                            runs[name].append(run)
                            loads[name].append(os.getloadavg()[0])
                            print(f"repeat {repeat}: {name:32} hit rate {run.hit_rate:.3f} answered {run.answered}/{run.sent}"
                                  f" TTFT p50 {statistics.median(run.ttft_s) if run.ttft_s else float('nan'):.3f}s"
                                  f" requests per replica {[int(n) for n in run.per_replica_requests]}"
                                  f" prompt tokens per replica {[int(q) for q in run.per_replica_queries]}"
                                  f" load {loads[name][-1]:.2f}", flush=True)
        finally:
            procs.stop_all()
    base = statistics.median(r.hit_rate for r in runs[BASELINE]) if runs.get(BASELINE) else 0.0
    print(f"\n{args.conversations} conversations × {args.turns} turns sharing one system prompt, concurrency "
          f"{args.concurrency}, {args.replicas} vLLM replicas, {args.repeats} repeats; {time.monotonic() - started:.0f} s; load average "
          f"at start {load_start[0]:.2f}/{load_start[1]:.2f}/{load_start[2]:.2f}, at end {os.getloadavg()[0]:.2f}")
    print("| router | hit rate per repeat | median hit rate | ÷ round-robin | answered | TTFT p50 | requests per replica (all repeats, a/b/…) "
          "| busier replica's share of prompt tokens | load avg (1 min) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in names:
        if name in why_not:
            print(f"| {name} | cannot run here: {why_not[name]} | | | | | | | |")
            continue
        rs = runs[name]
        rate = statistics.median(r.hit_rate for r in rs)
        sent, answered = sum(r.sent for r in rs), sum(r.answered for r in rs)
        ttft = statistics.median([t for r in rs for t in r.ttft_s]) if answered else float("nan")
        share = statistics.median(max(r.per_replica_queries) / r.queries if r.queries else 0.0 for r in rs)
        ratio = f"{rate / base:.2f}×" if base else "n/a"
        split = "/".join(str(int(sum(r.per_replica_requests[i] for r in rs))) for i in range(len(rs[0].per_replica_requests)))
        print(f"| {name} | {', '.join(f'{r.hit_rate:.3f}' for r in rs)} | **{rate:.3f}** | {ratio} | "
              f"{100 * answered / sent:.0f} % ({answered}/{sent}) | {1000 * ttft:.0f} ms | {split} | {100 * share:.0f} % | "
              f"{min(loads[name]):.1f}–{max(loads[name]):.1f} |")
    print(f"\nThe workload's ceiling (bench/pool_cache_bound.py --replicas {args.replicas} --conversations {args.conversations} "
          f"--turns {args.turns}):\n{ceiling(args)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
