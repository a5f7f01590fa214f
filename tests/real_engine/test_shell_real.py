"""The shell key `E` against a real container: a llama-server pod booted by `c3 pod up` on the real dockerd,
the cockpit on the real facade. `E` on the serving pod hands the terminal to a command (`App.suspend`); that
exact command is caught, then run as it would be — in a pseudo-terminal, since it asks docker for one
(`-it`) — with a few lines typed into the shell it opens: what comes back must come from inside that pod's
container (its hostname, a file put only there, the engine as its PID 1). Once the pod is stopped, `E` is
refused with one line that says so, and no command is run.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket

import pytest

from tests.real_engine.watching import boot_pod, cockpit_on
from tests.support import run_in_a_terminal

pytestmark = [pytest.mark.real_engine, pytest.mark.docker, pytest.mark.nvml]


@pytest.mark.timeout(600)
async def test_the_shell_key_opens_a_shell_inside_a_real_llama_pods_own_container_and_is_refused_once_it_stopped(pod_rig, docker_client, monkeypatch):
    from tests.cockpit.conftest import catch_shell, wait_for
    from tests.runtime.helpers import c3

    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    name = "shelled"
    await boot_pod(pod_rig, name, "llamacpp/real-tiny")
    container = docker_client.containers.get(f"c3-{name}")
    proof = secrets.token_hex(8)
    # A file only this container has: written through the Docker API, read back through the shell.
    assert container.exec_run(["sh", "-c", f"echo {proof} > /tmp/c3-shell-proof"]).exit_code == 0

    ran, suspended = catch_shell(monkeypatch, lambda argv: argv[:2] == ["docker", "exec"])
    async with cockpit_on(name) as pilot:
        app = pilot.app
        await pilot.press("E")
        await wait_for(pilot, lambda: bool(ran), timeout=30, what="the shell command")
        assert suspended == [True], "the terminal was not handed over"
        argv = ran[0]
        assert argv[:4] == ["docker", "exec", "-it", f"c3-{name}"], argv

        typed = "echo HOST=$(hostname); echo PROOF=$(cat /tmp/c3-shell-proof); echo INIT=$(tr '\\0' ' ' < /proc/1/cmdline); exit\n"
        out = await asyncio.to_thread(run_in_a_terminal, argv, typed)
        host = container.attrs["Config"]["Hostname"]
        assert f"HOST={host}" in out and host != socket.gethostname(), out
        assert f"PROOF={proof}" in out, out
        assert "INIT=" in out and "llama-server" in out.split("INIT=", 2)[-1], out

        down = await asyncio.to_thread(c3, "pod", "down", name)
        assert down.returncode == 0, down.stdout + down.stderr
        await pilot.press("E")
        refused = f"pod {name} is not running"
        await wait_for(pilot, lambda: any(refused in str(n.message) for n in app._notifications), timeout=30, what="the refusal")
        [note] = [n for n in app._notifications if refused in str(n.message)]
        first = str(note.message).split("\n")
        assert note.severity == "error" and len(first[0]) < 100 and refused in first[0], note.message
        assert len(ran) == 1 and suspended == [True], "a stopped pod's shell was run anyway"


@pytest.mark.timeout(600)
async def test_pod_exec_runs_the_command_inside_a_real_llama_pods_own_container_and_refuses_a_stopped_pod(pod_rig, docker_client):
    """`c3 pod exec NAME -- CMD` against a pod `c3 pod up` booted: the output comes from inside that pod's
    container (its hostname, a file only it has, the engine as its PID 1), a command that fails there exits 1
    naming its exit code, and once the pod is stopped exec is refused with one line, exit 1."""
    from tests.runtime.helpers import c3, one_error_line

    name = "execd"
    await boot_pod(pod_rig, name, "llamacpp/real-tiny")
    container = docker_client.containers.get(f"c3-{name}")
    proof = secrets.token_hex(8)
    assert container.exec_run(["sh", "-c", f"echo {proof} > /tmp/c3-exec-proof"]).exit_code == 0

    script = "echo HOST=$(hostname); echo PROOF=$(cat /tmp/c3-exec-proof); echo INIT=$(tr '\\0' ' ' < /proc/1/cmdline)"
    ran = await asyncio.to_thread(c3, "pod", "exec", name, "--", "sh", "-c", script)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    host = container.attrs["Config"]["Hostname"]
    assert f"HOST={host}\n" in ran.stdout and host != socket.gethostname(), ran.stdout
    assert f"PROOF={proof}\n" in ran.stdout, ran.stdout
    assert "llama-server" in ran.stdout.split("INIT=", 1)[-1], ran.stdout
    assert not (await asyncio.to_thread(os.path.exists, "/tmp/c3-exec-proof")), "the proof file is on the host: exec ran outside"

    failed = await asyncio.to_thread(c3, "pod", "exec", name, "--", "sh", "-c", "exit 3")
    assert failed.returncode == 1 and "exited 3 in pod execd" in one_error_line(failed.stderr), failed.stdout + failed.stderr

    down = await asyncio.to_thread(c3, "pod", "down", name)
    assert down.returncode == 0, down.stdout + down.stderr
    refused = await asyncio.to_thread(c3, "pod", "exec", name, "--", "hostname")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"pod {name} is not running" in one_error_line(refused.stderr), refused.stderr
    assert host not in refused.stdout, "the stopped pod's command ran anyway"
