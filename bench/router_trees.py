#!/usr/bin/env python3
"""Router CPU of `c3 pool serve` from several source trees, and nginx, interleaved: before/after figures
for a change to the router, taken in the same rounds so that the machine's drifting load hits all alike.

    git archive BASE backend c3 | tar -x -C /tmp/base
    cd /tmp && /path/to/checkout/.venv/bin/python /path/to/checkout/bench/router_trees.py \
        --trees /tmp/base,/path/to/checkout,nginx [--scenario capacity|paced] [--rounds 7] [--duration 4]

Run it from a directory that is none of the trees: `python -m c3` puts the working directory first on
`sys.path`, and each router is started with `PYTHONPATH=<tree>`. Same backends, load and placement as
`bench/router.py` (router on the first CPU; backends and load on the others): `capacity` is wrk against
a static nginx SSE answer (figure: requests per router CPU-second), `paced` is 64 streaming clients
against two stub engines (figure: router CPU ms per stream). Each round starts every target afresh.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import router as bench  # noqa: E402 - bench scripts run from a checkout
from peers import ROOT, Procs, free_port, start_nginx_router, start_static_backends, wait_http  # noqa: E402


def start_stubs(procs: Procs, work: Path, cpuset: set[int]) -> list[int]:
    ports = [free_port(), free_port()]
    for i, port in enumerate(ports):
        procs.start([sys.executable, str(bench.STUB), "--host", "127.0.0.1", "--port", str(port), "--name", f"s{i}",
                     "--tokens", str(bench.TOKENS), "--token-delay", str(bench.TOKEN_DELAY)], cpuset, work / f"stub{i}.log")
    for port in ports:
        wait_http(f"http://127.0.0.1:{port}/health", 30)
    return ports


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", required=True, help="comma-separated source trees (each holds backend/ and c3/), or `nginx`")
    ap.add_argument("--scenario", choices=("capacity", "paced"), default="capacity")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--duration", type=float, default=4.0)
    args = ap.parse_args()
    mine = sorted(os.sched_getaffinity(0))
    router_cpu, other_cpu = {mine[0]}, set(mine[1:] or mine)
    trees = [t.strip() for t in args.trees.split(",") if t.strip()]
    work = Path(tempfile.mkdtemp(prefix="c3-bench-trees-"))
    env = {"C3_HOME": str(work / "home"), "C3_STATE": str(work / "state")}
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    from backend.nodes.registry import add_node

    procs = Procs()
    results: dict[str, list[dict]] = {t: [] for t in trees}
    paced = args.scenario == "paced"
    try:
        ports = start_stubs(procs, work, other_cpu) if paced else start_static_backends(procs, work / "static", other_cpu, 16)
        names = []
        for port in ports:
            add_node(f"b{port}", f"http://127.0.0.1:{port}", "bench@localhost")
            names.append(f"b{port}")
        for rnd in range(args.rounds):
            for tree in trees:
                load = os.getloadavg()[0]
                target = Procs()
                try:
                    if tree == "nginx":
                        proc, port = start_nginx_router(target, work / f"nginx-{rnd}", router_cpu, ports)
                        health = f"http://127.0.0.1:{port}/health"
                    else:
                        port = free_port()
                        proc = target.start([sys.executable, "-m", "c3", "pool", "serve", "--nodes", ",".join(names), "--bind",
                                             f"127.0.0.1:{port}", "--sticky", "auto"], router_cpu, work / f"c3-{rnd}.log",
                                            {**env, "PYTHONPATH": tree})
                        health = f"http://127.0.0.1:{port}/c3/health"
                    if not wait_http(health, 30, proc):
                        raise SystemExit(f"{tree} did not start (logs under {work})")
                    target_addr = [("127.0.0.1", port)]
                    if paced:
                        r = bench.run_paced(target_addr, 64, 1.0, args.duration, other_cpu, proc.pid)
                        r["figure"] = r["cpu_ms_per_stream"]
                    else:
                        r = bench.run_capacity(target_addr, 64, 1.0, args.duration, other_cpu, proc.pid, work)
                        r["figure"] = r["per_core"]
                finally:
                    target.stop_all()
                r["load"] = load
                results[tree].append(r)
                print(f"round {rnd} {tree:<40} {bench.fmt(r['figure'], 3 if paced else 0)} "
                      f"{'ms per stream' if paced else 'req per CPU-s'}  errors {r['errors']}  load {load:.1f}", flush=True)
    finally:
        procs.stop_all()
    print()
    label = "router CPU ms per stream" if paced else "requests per router CPU-second"
    for tree, runs in results.items():
        figures = [r["figure"] for r in runs if r.get("figure") is not None]
        if figures:
            print(f"{tree:<40} median {label}: {statistics.median(figures):.3f}  ({', '.join(f'{x:.3f}' for x in figures)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
