"""`c3 demo` in a real terminal (tmux) at 120×40 and 80×24: create a pod, boot it, see it placed,
see a mismatch explained, stop everything, quit — keys only, as a newcomer would.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
C3 = Path(sys.executable).with_name("c3")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Tmux:
    """One private tmux server (its own socket) running one session."""

    def __init__(self, name: str, width: int, height: int, command: str) -> None:
        self.socket = f"c3-cockpit-{os.getpid()}-{name}"
        self.name = name
        # A detached session can start at tmux's default size whatever -x/-y say (seen under pytest), so
        # pin the size, and let the program start only once the pane has it.
        gate = f"while [ \"$(stty size)\" != '{height} {width}' ]; do sleep 0.1; done; "
        self.run("-f", "/dev/null", "new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), gate + command)
        self.run("set-option", "-t", name, "window-size", "manual")
        self.run("resize-window", "-t", name, "-x", str(width), "-y", str(height))
        # The pane's shell leads its own process group (tmux makes it a session leader); c3 runs in it.
        self.group = int(self.run("display-message", "-p", "-t", name, "#{pane_pid}").strip() or 0)

    def run(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30)
        return done.stdout

    def capture(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.name)

    def alive(self) -> bool:
        return subprocess.run(["tmux", "-L", self.socket, "has-session", "-t", self.name], capture_output=True, timeout=30).returncode == 0

    def keys(self, *keys: str) -> None:
        for key in keys:
            self.run("send-keys", "-t", self.name, key)
            time.sleep(0.15)  # pacing between keystrokes, like a person; not an assertion

    def type(self, text: str) -> None:
        self.run("send-keys", "-t", self.name, "-l", text)
        time.sleep(0.3)

    def wait_for(self, pattern: str, timeout: float = 30.0) -> str:
        """Poll the screen until `pattern` (regex over whitespace-collapsed text) shows, else fail with the screen."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.capture()
            if re.search(pattern, " ".join(screen.split())):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"never saw /{pattern}/ on screen:\n{screen}")

    def kill(self) -> None:
        """End the tmux server (the pane's programs get SIGHUP, as when an SSH session drops), then make sure
        nothing of this pane outlives the test: once in a CI run (a loaded box, the New-pod modal open) a
        `c3 demo` outlived its hangup with its gateway, so what is left after 10 s gets SIGTERM (the demo then
        stops its own gateway), then SIGKILL — only this pane's process group, by its id."""
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)
        if self.group <= 1:
            return
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.group, sig)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    os.killpg(self.group, 0)
                except ProcessLookupError:
                    return
                time.sleep(0.1)
            if sig is None:
                print(f"tmux {self.name}: the pane's programs outlived the hangup by 10 s; stopping them (SIGTERM)")


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
def test_demo_in_tmux(size, tmp_path, require_service):
    require_service("tmux", shutil.which("tmux") is not None, "apt-get install tmux")
    home, state = tmp_path / "home", tmp_path / "state"
    env = f"env C3_HOME={home} C3_STATE={state} C3_STUB_STARTUP_DELAY=1 TERM=xterm-256color"
    term = Tmux(f"demo{size[0]}", size[0], size[1], f"cd {ROOT} && {env} {C3} demo")
    try:
        term.wait_for(r"No pods yet")

        # A pod, booted and placed.
        term.keys("N")
        term.wait_for(r"New pod")
        term.wait_for(r"· on GPUs? \d")  # the verdicts are in: the modal is settled
        term.type("chat")
        term.keys("Tab")
        term.type("vllm/llama-3.1-8b")
        term.wait_for(r"✓ fits\s+(?:[\d.]+ GiB\s+)?vllm/llama-3\.1-8b ")
        term.keys("Tab", "Tab", "Tab", "C-u")
        term.type(str(free_port()))
        term.keys("C-s")
        term.wait_for(r"Create pod chat")
        term.keys("y")
        term.wait_for(r"created pod chat")
        term.keys("u")
        term.wait_for(r"Boot pod chat")
        term.keys("y")
        term.wait_for(r"created pod chat|Boot pod chat")
        term.wait_for(r"pod chat is serving", timeout=60)
        term.wait_for(r"● serving")
        term.wait_for(r"✓ placed")

        # The demo's misplaced engine: booted, and the mismatch explained.
        term.keys("N")
        term.wait_for(r"New pod")
        term.wait_for(r"· on GPUs? \d")
        term.type("odd")
        term.keys("Tab")
        term.type("demo-misplaced")
        term.wait_for(r"custom/demo-misplaced")
        term.keys("Tab", "Tab", "Tab", "C-u")
        term.type(str(free_port()))
        term.keys("C-s")
        term.wait_for(r"Create pod odd")
        term.keys("y")
        term.wait_for(r"created pod odd")
        term.wait_for(r"odd\s+custom/demo")  # listed, and selected: the pod just created
        term.keys("u")
        term.wait_for(r"Boot pod odd")
        term.keys("y")
        term.wait_for(r"PLACEMENT\s+MISMATCH", timeout=60)
        term.wait_for(r"not on requested GPU 1")

        # Stop everything, after seeing what will stop.
        term.keys("o")
        term.wait_for(r"Stop the whole estate")
        term.wait_for(r"pod chat .*pod odd|pod odd .*pod chat")
        term.keys("y")
        term.wait_for(r"stopped 2 pod", timeout=60)
        term.keys("q")
        deadline = time.monotonic() + 20
        while term.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not term.alive(), "the cockpit did not exit on q"
    finally:
        term.kill()
        from backend.sim.runtime import SimRuntime

        runtime = SimRuntime(base=state / "demo" / "state" / "sim")
        for name in runtime.workloads():
            runtime.stop(name, timeout=5)
