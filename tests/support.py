"""Small helpers every integration test area shares: polling with a deadline, free ports, HTTP checks.

Tests poll for a condition with a generous deadline instead of sleeping a fixed time: on a loaded
2-core CI machine a daemon may take many times longer than on a laptop, and a fixed sleep is either
too short there or wasted everywhere else.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

# Below Linux's ephemeral range (32768–60999): a port picked here is never handed to some other
# process's outgoing connection between our check and the moment the code under test binds it.
_PORT_RANGE = (20000, 32000)

# Test traffic goes to loopback and the test hosts only, never through a proxy from the environment.
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 30.0,
    what: str = "condition",
    *,
    interval: float = 0.05,
    proc: subprocess.Popen | None = None,
    log: Path | None = None,
) -> T:
    """Poll `predicate()` until it returns something truthy and return that.

    Fails (AssertionError) after `timeout` seconds, or as soon as `proc` has exited; the message
    names `what` and carries the tail of `log` when given.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            state = f"the process exited with status {proc.returncode}"
            break
        if time.monotonic() >= deadline:
            state = f"timed out after {timeout:.0f}s"
            break
        time.sleep(interval)
    tail = ""
    if log is not None and log.exists():
        tail = "\n" + log.read_text(errors="replace")[-3000:]
    raise AssertionError(f"waiting for {what}: {state}{tail}")


def free_port(host: str = "") -> int:
    """A TCP port nobody listens on, outside the ephemeral range (see `_PORT_RANGE`)."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(*_PORT_RANGE)
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port in {_PORT_RANGE}")


def http_status(url: str, headers: dict[str, str] | None = None, timeout: float = 3.0) -> int | None:
    """The HTTP status `url` answers with, or None when nothing answers."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with _NO_PROXY.open(request, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ValueError):
        return None


def wait_for_http(url: str, timeout: float = 60.0, *, status: int = 200, proc: subprocess.Popen | None = None,
                  log: Path | None = None) -> int:
    """Wait until `url` answers with `status`."""
    return wait_until(lambda: http_status(url, timeout=2) == status and status, timeout, f"{url} to answer {status}",
                      interval=0.1, proc=proc, log=log)


def use_rig(tmp_path, monkeypatch, text: str):
    """Write a simulated rig file and point C3_RIG at it (the `rig` fixtures of several test files)."""
    path = tmp_path / "rig.yaml"
    path.write_text(text)
    monkeypatch.setenv("C3_RIG", str(path))
    return path


def health_verdicts(hub, until: Callable[..., bool], timeout: float, poll_s: float = 0.02) -> list[tuple[bool, int, bool]]:
    """Every distinct (healthy, late, timed_out) the live hub's first pod's health went through until
    `until(health)` holds; fails with that trail after `timeout` seconds."""
    seen: list[tuple[bool, int, bool]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = hub.latest().pods
        health = pods[0].health if pods else None
        if health is not None:
            said = (health.healthy, health.late, health.timed_out)
            if not seen or seen[-1] != said:
                seen.append(said)
            if until(health):
                return seen
        time.sleep(poll_s)
    raise AssertionError(f"not reached within {timeout} s: {seen}")


def run_in_a_terminal(argv: list[str], typed: str, timeout: float = 60) -> str:
    """Run `argv` with a pseudo-terminal as its stdin/stdout/stderr, type `typed`, and return everything it
    wrote until it exits."""
    master, slave = os.openpty()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    out = bytearray()
    try:
        os.write(master, typed.encode())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other end closed (the command exited)
                break
            if not chunk:
                break
            out += chunk
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return out.decode(errors="replace")
