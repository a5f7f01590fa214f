#!/usr/bin/env python3
"""Bytes the cockpit writes to the terminal when a modal opens and closes — what an SSH link carries.

Runs the real `c3 demo` in a pseudo-terminal of the given size (TERM=xterm-256color, truecolor), waits
until it is idle, then opens and closes the Help (`?`) and New-pod (`N`) modals `--repeat` times,
counting the bytes written in the `--window` seconds after each key. Prints medians per action,
the idle rate over the same window, and the load average.

    .venv/bin/python bench/modal_bytes.py [--size 120x40] [--repeat 5] [--window 1.5]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import statistics
import struct
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
C3 = Path(sys.executable).with_name("c3")


class Terminal:
    """`c3 demo` on a pty; a reader thread counts every byte it writes, with the time."""

    def __init__(self, cols: int, rows: int, env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.chdir(ROOT)
            os.execve(str(C3), [str(C3), "demo"], env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.chunks: list[tuple[float, int]] = []
        self.text = bytearray()
        self.alive = True
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while self.alive:
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if not ready:
                continue
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            self.chunks.append((time.monotonic(), len(data)))
            self.text += data
            del self.text[:-200_000]

    def bytes_between(self, start: float, end: float) -> int:
        return sum(n for t, n in list(self.chunks) if start <= t < end)

    def press(self, key: bytes, window: float) -> int:
        start = time.monotonic()
        os.write(self.fd, key)
        time.sleep(window)
        return self.bytes_between(start, start + window)

    def wait_for(self, needle: bytes, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text and time.monotonic() < deadline:
            time.sleep(0.1)
        if needle not in self.text:
            raise SystemExit(f"never saw {needle!r}")

    def close(self) -> None:
        os.write(self.fd, b"\x11")  # ctrl+q
        time.sleep(1.0)
        self.alive = False
        try:
            os.kill(self.pid, 15)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="120x40")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--window", type=float, default=1.5)
    args = parser.parse_args()
    cols, rows = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory(prefix="c3-modal-bytes-") as tmp:
        env = {"PATH": os.environ.get("PATH", ""), "HOME": tmp, "C3_HOME": f"{tmp}/home", "C3_STATE": f"{tmp}/state", "TERM": "xterm-256color",
               "COLORTERM": "truecolor", "LANG": "C.UTF-8", "C3_STUB_STARTUP_DELAY": "0"}
        term = Terminal(cols, rows, env)
        try:
            term.wait_for(b"No pods yet")
            time.sleep(3.0)
            idle_start = time.monotonic()
            time.sleep(args.window * 2)
            idle = term.bytes_between(idle_start, idle_start + args.window * 2) / 2
            results: dict[str, list[int]] = {"help open": [], "help close": [], "new-pod open": [], "new-pod close": []}
            for _ in range(args.repeat):
                results["help open"].append(term.press(b"?", args.window))
                results["help close"].append(term.press(b"\x1b", args.window))
                results["new-pod open"].append(term.press(b"N", args.window))
                results["new-pod close"].append(term.press(b"\x1b", args.window))
        finally:
            term.close()
    print(f"c3 demo at {cols}x{rows}, {args.repeat} repeats, {args.window:.1f} s window; load average {os.getloadavg()[0]:.2f}")
    print(f"{'action':<16}{'median bytes':>14}{'min':>10}{'max':>10}")
    print(f"{'idle (window)':<16}{idle:>14.0f}")
    for name, values in results.items():
        print(f"{name:<16}{statistics.median(values):>14.0f}{min(values):>10}{max(values):>10}")


if __name__ == "__main__":
    main()
