#!/usr/bin/env python3
"""Router memory per idle client connection, on loopback.

    .venv/bin/python bench/pool_idle_conns.py [--conns 2000] [--loop uvloop|asyncio] [--rounds 3]

Starts a router (the real `PoolServer`, one backend that is never asked: only `/c3/health` is
requested) in a child process, opens `--conns` keep-alive connections that each send one request
and read its answer, then stay idle. RSS (VmRSS from /proc) is read after a warm-up batch and again
after all connections are idle; the figure is the growth divided by the connections, in KiB. Each
round starts a fresh router (freed connection memory stays in the process, so a second batch in the
same process would reuse it and read low); the median of `--rounds` is printed.
"""

from __future__ import annotations

import argparse
import os
import selectors
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import asyncio, os, sys
from backend.pool.proxy import PoolServer
from backend.pool.router import PoolConfig, Router

async def main():
    cfg = PoolConfig(backends=[("a", "http://127.0.0.1:9")], host="127.0.0.1", port=0, probe_interval_s=3600)
    server = PoolServer(Router(cfg, salt=b"0" * 32))
    await server.start()
    print(server.port, flush=True)
    await asyncio.Event().wait()

if sys.argv[1] == "uvloop":
    import uvloop
    uvloop.run(main())
else:
    asyncio.run(main())
"""

REQUEST = b"GET /c3/health HTTP/1.1\r\nHost: x\r\n\r\n"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def open_idle(port: int, n: int) -> list[socket.socket]:
    """n connections that each got one answer and now sit idle (keep-alive)."""
    socks = []
    sel = selectors.DefaultSelector()
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(REQUEST)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        socks.append(s)
    pending = {s.fileno(): b"" for s in socks}
    deadline = time.monotonic() + 60
    while pending and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            data = s.recv(65536)
            if not data:
                raise RuntimeError("the router closed a connection")
            pending[s.fileno()] += data
            if b"\r\n\r\n" in pending[s.fileno()] and pending[s.fileno()].endswith(b"}"):
                del pending[s.fileno()]
                sel.unregister(s)
    if pending:
        raise RuntimeError(f"{len(pending)} connections got no answer")
    sel.close()
    return socks


def one_round(loop: str, conns: int) -> float:
    child = subprocess.Popen([sys.executable, "-c", CHILD, loop], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        warm = open_idle(port, 100)  # the first connections pay for one-off growth (code paths, free lists)
        time.sleep(0.5)
        before = rss_kib(child.pid)
        socks = open_idle(port, conns)
        time.sleep(1.0)
        after = rss_kib(child.pid)
        for s in socks + warm:
            s.close()
        return (after - before) / conns
    finally:
        child.kill()
        child.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conns", type=int, default=2000)
    ap.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    figures = [one_round(args.loop, args.conns) for _ in range(args.rounds)]
    print(f"loop={args.loop} conns={args.conns} KiB per idle connection, rounds: " + ", ".join(f"{f:.2f}" for f in figures))
    print(f"median: {statistics.median(figures):.2f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
