"""`c3 pod exec` on the simulated rig: the pod's "container" is its stub-engine process, so the command runs
as a local process in that pod's sandbox — a working directory of its own under the simulator's state, the
environment the engine was started with (its GPU mask, the secrets c3 handed it, masked in the output) and
`C3_POD` / `C3_SIMULATED=1` saying where it is. Exit codes and error lines as with Docker: a command that
exits 3 is one `exited 3` line (exit 1), a command past `--timeout` one line (and it is stopped), a pod that
does not run one line; a missing command is a usage error (exit 2)."""

from __future__ import annotations

import os
import time

from tests.runtime.helpers import c3, c3_json, one_error_line, stub_entry, write_catalog
from tests.runtime.test_sim_lifecycle import create, sim  # noqa: F401 - the fixture

SECRET = "hf_c3_sim_exec_token_not_real"


def _pids_running(marker: str) -> list[int]:
    """Processes whose command line holds `marker` (the test's own, unique sleep)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if marker.encode() in handle.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def test_exec_runs_the_command_in_the_simulated_pods_sandbox_with_dockers_exit_codes(sim, monkeypatch):  # noqa: F811
    monkeypatch.setenv("HF_TOKEN", SECRET)
    write_catalog([stub_entry()])
    create(sim, "chat", "1")
    nothing = c3("pod", "exec", "chat")
    assert nothing.returncode == 2 and "give the command after --" in one_error_line(nothing.stderr)
    stopped = c3("pod", "exec", "chat", "--", "true")
    assert stopped.returncode == 1 and "pod chat is not running" in one_error_line(stopped.stderr), stopped.stderr
    up = c3("pod", "up", "chat")
    assert up.returncode == 0, up.stdout + up.stderr

    script = "echo POD=$C3_POD SIM=$C3_SIMULATED DIR=$(pwd) GPUS=$NVIDIA_VISIBLE_DEVICES; echo to stderr >&2"
    ran = c3("pod", "exec", "chat", "--", "sh", "-c", script)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    sandbox = os.path.realpath(os.path.join(os.environ["C3_STATE"], "sim", "sandbox", "chat"))
    uuid = c3_json("gpus")["gpus"][1]["uuid"]
    assert f"POD=chat SIM=1 DIR={sandbox} GPUS={uuid}\n" in ran.stdout, ran.stdout
    assert "to stderr" in ran.stdout, ran.stdout  # stdout and stderr together, as docker exec gives them

    env = c3("pod", "exec", "chat", "--", "env")
    assert env.returncode == 0 and "HF_TOKEN=***" in env.stdout, env.stdout
    assert SECRET not in env.stdout + env.stderr

    failed = c3("pod", "exec", "chat", "--", "sh", "-c", "echo partial; exit 3")
    assert failed.returncode == 1 and "partial" in failed.stdout, (failed.stdout, failed.stderr)
    assert "exited 3 in pod chat" in one_error_line(failed.stderr)
    missing = c3("pod", "exec", "chat", "--", "no-such-program-c3")
    assert missing.returncode == 1 and "exited 127 in pod chat" in one_error_line(missing.stderr), missing.stderr
    assert "no-such-program-c3" in missing.stdout, missing.stdout

    marker = f"{os.getpid()}.{time.monotonic_ns() % 1000}"  # a sleep length no other process has
    slow = c3("pod", "exec", "chat", "--timeout", "2", "--", "sleep", f"3{marker}", timeout=60)
    assert slow.returncode == 1 and "did not finish within 2 s" in one_error_line(slow.stderr), slow.stderr
    assert _pids_running(f"3{marker}") == [], "the timed-out command was left running"

    assert c3("pod", "down", "chat").returncode == 0
    gone = c3("pod", "exec", "chat", "--", "true")
    assert gone.returncode == 1 and "pod chat is not running" in one_error_line(gone.stderr), gone.stderr


def test_the_sandbox_bounds_what_it_keeps_and_never_waits_on_what_the_command_left_behind(tmp_path):
    """backend/sim/sandbox.py directly, this test's process standing in for the stub engine: output past
    4 MiB is read and dropped (the command never blocks on a full pipe) and marked cut; a command that exits
    while a child it started still holds the output open returns at once, and that child is stopped."""
    from backend.runtime import cgroup
    from backend.runtime.models import MAX_EXEC_OUTPUT
    from backend.sim import sandbox

    me, started = os.getpid(), cgroup.start_time(os.getpid())
    big = sandbox.run(tmp_path, "chat", me, started, ["sh", "-c", f"head -c {MAX_EXEC_OUTPUT + 4096} /dev/zero; echo; exit 4"], 60)
    assert big.exit_code == 4 and big.truncated and len(big.output) == MAX_EXEC_OUTPUT
    marker = f"7{os.getpid()}.{time.monotonic_ns() % 1000}"
    began = time.monotonic()
    left = sandbox.run(tmp_path, "chat", me, started, ["sh", "-c", f"sleep {marker} & echo done"], 60)
    assert left.exit_code == 0 and left.output == "done\n" and time.monotonic() - began < 10
    assert _pids_running(marker) == [], "the child left behind still runs"
    assert (tmp_path / "sandbox" / "chat").is_dir()
