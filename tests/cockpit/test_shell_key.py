"""`E`: a shell in the selected pod's container, the cockpit suspended meanwhile — on the simulated rig a shell in
the pod's sandbox (its stub-engine process is its "container", as for `c3 pod exec`) — and the command it runs."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from backend.sim.runtime import SimRuntime
from backend.views.workloads import SHELL, shell_argv
from tests.cockpit.conftest import catch_shell, orchestration, real_app, settle, wait_for
from tests.support import run_in_a_terminal


def test_the_command_is_docker_exec_with_a_terminal_into_the_pods_container():
    assert shell_argv("chat") == ["docker", "exec", "-it", "c3-chat", "sh", "-c", SHELL]
    # The shell part runs bash where there is one, else sh (here: whichever the machine has).
    probe = SHELL.replace("exec bash", "exec bash -c 'echo bash'").replace("exec sh", "exec sh -c 'echo sh'")
    assert subprocess.run(["sh", "-c", probe], capture_output=True, text=True, timeout=10).stdout.strip() in ("bash", "sh")


@pytest.mark.timeout(180)
async def test_the_shell_key_opens_a_shell_in_the_simulated_pods_sandbox_and_is_refused_once_it_stopped(demo_world, monkeypatch):
    """On the simulated rig the pod's "container" is its stub-engine process: `E` hands the terminal to a
    shell in the pod's sandbox. The command handed over is caught, then run in a pseudo-terminal with a few
    lines typed: the shell says it is pod chat's (C3_POD, C3_SIMULATED, its prompt), works in the pod's own
    directory under the simulator's state and has the engine's environment (its GPU mask). Once the pod is
    stopped, `E` is refused in one line and nothing is run."""
    app, log = real_app(demo_world)
    ran, suspended = catch_shell(monkeypatch, lambda argv: argv[:3] == [sys.executable, "-m", "backend.sim.sandbox"])
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await wait_for(pilot, lambda: [p.name for p in orchestration(app).pods][:1] == ["chat"], what="the pods")
        await pilot.press("E")
        await wait_for(pilot, lambda: bool(ran), timeout=30, what="the shell command")
        assert "shell_command" in log.calls and suspended == [True], "the terminal was not handed over"
        typed = "echo POD=$C3_POD SIM=$C3_SIMULATED; echo DIR=$(pwd); echo GPUS=$NVIDIA_VISIBLE_DEVICES; exit\n"
        out = await asyncio.to_thread(run_in_a_terminal, ran[0], typed, 30)
        sandbox = os.path.realpath(os.path.join(os.environ["C3_STATE"], "sim", "sandbox", "chat"))
        chat = next(p for p in orchestration(app).pods if p.name == "chat")
        assert "POD=chat SIM=1" in out and f"DIR={sandbox}" in out, out
        assert "[c3 simulated pod chat]" in out, out  # the prompt says where the shell runs
        assert "GPUS=GPU-" in out and "GPUS=\r" not in out and "GPUS=\n" not in out, out
        assert len(chat.gpus) == 1, chat

        await asyncio.to_thread(SimRuntime().stop, "chat", 5.0)
        await pilot.press("E")
        refused = "pod chat is not running"
        await wait_for(pilot, lambda: any(refused in str(n.message) for n in app._notifications), timeout=30, what="the refusal")
        [note] = [n for n in app._notifications if refused in str(n.message)]
        assert note.severity == "error" and str(note.message).split("\n")[0].startswith(refused), note.message
        assert len(ran) == 1 and suspended == [True], "a stopped pod's shell was run anyway"
