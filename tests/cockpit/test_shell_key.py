"""`e`: a shell in the selected pod's container, the cockpit suspended meanwhile — refused with a clear toast on
the simulated rig (its pods are local processes, as `c3 pod exec` refuses), and the command it would run."""

from __future__ import annotations

import subprocess

from backend.views.workloads import SHELL, shell_argv
from tests.cockpit.conftest import orchestration, real_app, settle, wait_for


def test_the_command_is_docker_exec_with_a_terminal_into_the_pods_container():
    assert shell_argv("chat") == ["docker", "exec", "-it", "c3-chat", "sh", "-c", SHELL]
    # The shell part runs bash where there is one, else sh (here: whichever the machine has).
    probe = SHELL.replace("exec bash", "exec bash -c 'echo bash'").replace("exec sh", "exec sh -c 'echo sh'")
    assert subprocess.run(["sh", "-c", probe], capture_output=True, text=True, timeout=10).stdout.strip() in ("bash", "sh")


async def test_the_shell_key_is_refused_on_the_simulated_rig(shared_world, monkeypatch):
    app, log = real_app(shared_world)
    suspended = []
    monkeypatch.setattr(type(app), "suspend", lambda self: suspended.append(True))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await wait_for(pilot, lambda: [p.name for p in orchestration(app).pods][:1] == ["chat"], what="the pods")
        await pilot.press("E")
        await wait_for(pilot, lambda: any("no shell in pod chat" in n.message for n in app._notifications), what="the refusal")
        [note] = [n for n in app._notifications if "no shell in pod chat" in n.message]
        assert "simulated runtime" in note.message and "local process, not a container" in note.message and note.severity == "error"
        assert "shell_command" in log.calls and suspended == []  # asked the facade; never left the screen
