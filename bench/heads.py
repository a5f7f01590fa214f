#!/usr/bin/env python3
"""Request-head parsing cost: the router's llhttp path vs the split parser it replaced, h11 and aiohttp.

    .venv/bin/python bench/heads.py [--aiohttp-python .rig/bench-venv/bin/python]

One 16-header OpenAI-SDK request head, parsed N times per repeat, median of 7 repeats, µs per head.
"c3 now" is `backend.pool.heads.parse_request` (llhttp via httptools + the router's own checks);
"c3 before" is the split-based parser as it was at commit e2bb70b (loaded from git, not kept in the tree);
aiohttp's C parser (llhttp too) runs in the bench venv if given, since aiohttp is not a c3 dependency.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import timeit
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HEAD = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8011\r\nAccept-Encoding: gzip, deflate\r\nConnection: keep-alive\r\n"
    b"Accept: application/json\r\nContent-Type: application/json\r\nUser-Agent: OpenAI/Python 1.54.0\r\nX-Stainless-Lang: python\r\n"
    b"X-Stainless-Package-Version: 1.54.0\r\nX-Stainless-OS: Linux\r\nX-Stainless-Arch: x64\r\nX-Stainless-Runtime: CPython\r\n"
    b"X-Stainless-Runtime-Version: 3.11.7\r\nAuthorization: Bearer sk-0123456789abcdef0123456789abcdef\r\n"
    b"X-Stainless-Async: false\r\nX-Stainless-Retry-Count: 0\r\nContent-Length: 2048\r\n\r\n"
)
AIOHTTP = """
import asyncio, statistics, timeit
from aiohttp.http_parser import HttpRequestParser
loop = asyncio.new_event_loop()
class P:
    def __init__(self): self._loop = loop
HEAD = %r
def one():
    HttpRequestParser(P(), loop, 2**16, max_line_size=8190, max_field_size=8190).feed_data(HEAD)
runs = [timeit.timeit(one, number=%d) / %d * 1e6 for _ in range(7)]
print(statistics.median(runs))
"""


def median_us(fn, n: int) -> float:
    return statistics.median(timeit.timeit(fn, number=n) / n * 1e6 for _ in range(7))


def old_parser():
    source = subprocess.run(["git", "-C", str(ROOT), "show", "e2bb70b:backend/pool/http1.py"], capture_output=True, text=True, check=True).stdout
    module = types.ModuleType("old_http1")
    exec(compile(source, "old_http1", "exec"), module.__dict__)  # noqa: S102 - our own history, for the comparison
    return module


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=20000)
    parser.add_argument("--aiohttp-python", default=None)
    args = parser.parse_args()
    import h11

    from backend.pool.heads import forward_fields, parse_request

    old = old_parser()
    rows = [
        ("c3 now: llhttp (httptools) + checks", median_us(lambda: parse_request(HEAD), args.n)),
        ("c3 now: parse + re-serialize forwarded head", median_us(lambda: forward_fields(parse_request(HEAD), {b"host"}), args.n)),
        ("c3 before: bytes.split parser", median_us(lambda: old.parse_request(HEAD), args.n)),
        ("c3 before: parse + forward_lines", median_us(lambda: old.forward_lines(old.parse_request(HEAD), {b"host"}), args.n)),
    ]

    def h11_parse():
        conn = h11.Connection(h11.SERVER)
        conn.receive_data(HEAD)
        conn.next_event()

    rows.append(("h11 0.16 (uvicorn --http h11)", median_us(h11_parse, args.n // 4)))
    if args.aiohttp_python and os.path.exists(args.aiohttp_python):
        out = subprocess.run([args.aiohttp_python, "-c", AIOHTTP % (HEAD, args.n, args.n)], capture_output=True, text=True)
        rows.append(("aiohttp C parser (llhttp)", float(out.stdout.strip()) if out.returncode == 0 else float("nan")))
        if out.returncode:
            print("aiohttp:", out.stderr.strip().splitlines()[-1])
    load = os.getloadavg()[0]
    base = rows[0][1]
    print(f"16-header request head, median of 7 x {args.n}; load average {load:.2f} (shared 2-vCPU VM)")
    for name, us in rows:
        print(f"  {name:48s} {us:7.2f} µs   {us / base:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
