#!/usr/bin/env python3
"""Router CPU per relayed chunk: the chunked-response relay in `data_received` (what the router runs)
vs the read loop on the StreamReader it replaced (the same code with `transport=None`).

    .venv/bin/python bench/relay.py [--chunks 20000] [--repeats 5]

This process relays one chunked body from a backend socket to a client socket with
`http1.relay_chunked`; a helper process plays backend and client in lock-step (it sends the next SSE
chunk only after the previous one reached the client), so every chunk is a separate read, as with a
paced token stream. Figure: this process's CPU time per chunk (time.process_time), median of repeats,
both variants interleaved, uvloop.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

EVENT = b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok "}}]}\n\n'
CHUNK = b"%x\r\n%s\r\n" % (len(EVENT), EVENT)


def helper(backend_fd: int, client_fd: int, chunks: int) -> None:
    backend = socket.socket(fileno=backend_fd)
    client = socket.socket(fileno=client_fd)
    for _ in range(chunks):
        backend.sendall(CHUNK)
        got = 0
        while got < len(CHUNK):
            got += len(client.recv(65536))
    backend.sendall(b"0\r\n\r\n")
    got = 0
    while got < 5:
        got += len(client.recv(65536))


async def one(chunks: int, via_protocol: bool) -> float:
    from backend.pool.http1 import relay_chunked

    b_ours, b_theirs = socket.socketpair()
    c_ours, c_theirs = socket.socketpair()
    proc = subprocess.Popen([sys.executable, __file__, "--helper", str(b_theirs.fileno()), str(c_theirs.fileno()), str(chunks)],
                            pass_fds=(b_theirs.fileno(), c_theirs.fileno()))
    b_theirs.close()
    c_theirs.close()
    up_r, up_w = await asyncio.open_connection(sock=b_ours)
    _, cl_w = await asyncio.open_connection(sock=c_ours)
    started = time.process_time()
    await relay_chunked(up_r, cl_w.write, cl_w.drain, transport=up_w.transport if via_protocol else None,
                        client_buffer=cl_w.transport.get_write_buffer_size)
    await cl_w.drain()
    used = time.process_time() - started
    proc.wait(30)
    up_w.close()
    cl_w.close()
    return used / chunks * 1e6


def main() -> int:
    if sys.argv[1:2] == ["--helper"]:
        helper(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    import uvloop

    runs: dict[str, list[float]] = {"data_received relay (now)": [], "StreamReader read loop (before)": []}
    for _ in range(args.repeats):
        runs["data_received relay (now)"].append(uvloop.run(one(args.chunks, True)))
        runs["StreamReader read loop (before)"].append(uvloop.run(one(args.chunks, False)))
    print(f"{args.chunks} chunks of {len(CHUNK)} B per run, {args.repeats} interleaved repeats, uvloop; "
          f"load average {os.getloadavg()[0]:.2f}")
    for name, vals in runs.items():
        print(f"  {name:34s} {statistics.median(vals):6.2f} µs CPU per chunk   (runs: {', '.join(f'{v:.2f}' for v in vals)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
