"""The foreground runner with both nodes on this machine (no SSH, no netns): start order, secrets on
stdin, Ctrl+C and a dying part each stop every part and leave no process behind."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECRET = "hf_local_runner_secret_987"

FAKE = """#!/bin/sh
echo "fake pid=$$ host=$VLLM_HOST_IP if=$NCCL_SOCKET_IFNAME tok=${HF_TOKEN:+set} args=$*"
case "$*" in *--headless*) exec sleep 300;; esac
[ -n "$FAKE_FAIL" ] && { sleep 0.5; exit 7; }
exec sleep 300
"""


def start(tmp_path: Path, **env: str) -> tuple[subprocess.Popen, Path]:
    fake = tmp_path / "vllm"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    log = tmp_path / "runner.log"
    port = random.randint(30000, 39000)
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tests.shard._local_runner", str(fake), str(port)], cwd=ROOT,
                                stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "HF_TOKEN": SECRET, **env},
                                start_new_session=True)
    return proc, log


def pids_started(log: Path, count: int, proc: subprocess.Popen, deadline_s: float = 60) -> list[int]:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        pids = [int(p) for p in re.findall(r"fake pid=(\d+)", log.read_text(errors="replace"))]
        if len(pids) >= count or proc.poll() is not None:
            return pids
        time.sleep(0.1)
    return []


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_ctrl_c_stops_every_part(tmp_path):
    proc, log = start(tmp_path)
    try:
        pids = pids_started(log, 2, proc)
        assert len(pids) == 2, log.read_text()
        text = log.read_text()
        assert text.index("starting vllm serve (rank 0, API)") < text.index("starting vllm serve (rank 1, headless)")
        assert "host=127.0.0.2 if=eth9 tok=set" in text and SECRET not in text
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
        assert "every node's part is stopped" in log.read_text()
        assert not any(alive(p) for p in pids)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigterm_is_handled_like_ctrl_c(tmp_path):
    proc, log = start(tmp_path)
    try:
        pids = pids_started(log, 2, proc)
        assert len(pids) == 2, log.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
        assert not any(alive(p) for p in pids)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_dying_server_stops_the_rest_and_passes_its_status(tmp_path):
    proc, log = start(tmp_path, FAKE_FAIL="1")
    try:
        rc = proc.wait(timeout=60)
        text = log.read_text()
        assert rc == 7, text
        assert "c3: error: phase load failed on node a: vllm serve (rank 0, API) exited with status 7 before the server answered" in text
        assert "  | fake pid=" in text  # the node's last lines come with the error
        pids = sorted({int(p) for p in re.findall(r"fake pid=(\d+)", text)})
        assert len(pids) == 2 and not any(alive(p) for p in pids)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_kill_group_script_stops_a_whole_group_under_posix_sh():
    """dash (Debian's /bin/sh, also over SSH) has no `kill --`: the script must not rely on it."""
    import asyncio

    from backend.remote.local import LocalShell
    from backend.remote.node import Node
    from backend.shard.scripts import kill_group_script

    async def go() -> tuple[int, int]:
        e = LocalShell(Node(name="a", host="http://127.0.0.1:8000", ssh="u@127.0.0.1"))
        p = await e.spawn("sleep 300 & exec sleep 301")
        await asyncio.sleep(0.3)
        assert p.pgid is not None
        await e.run(kill_group_script(p.pgid, 5))
        rc = await asyncio.wait_for(p.wait(), 10)
        left = await e.run(f"kill -0 -{p.pgid} 2>/dev/null && echo alive || echo gone")
        return rc, left.stdout.strip() == "gone"

    rc, gone = asyncio.run(go())
    assert rc == -signal.SIGTERM and gone


def test_stop_services_runs_on_every_node_before_anything_starts(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "sudo-calls"
    sudo = bin_dir / "sudo"
    sudo.write_text(f"#!/bin/sh\necho \"$*\" >> {calls}\n")
    sudo.chmod(0o755)
    proc, log = start(tmp_path, FAKE_STOP_SERVICES="1", PATH=f"{bin_dir}:{os.environ['PATH']}")
    try:
        pids = pids_started(log, 2, proc)
        assert len(pids) == 2, log.read_text()
        assert calls.read_text().splitlines() == ["-n systemctl stop vllm-single.service"] * 2
        text = log.read_text()
        assert text.index("[b] stop vllm-single.service: done") < text.index("starting vllm serve (rank 0, API)")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_kill_group_script_refuses_groups_that_mean_everyone():
    """`kill -TERM -1` would signal every process on the node; `-0` the caller's own group."""
    from backend.shard.scripts import kill_group_script

    for pgid in (0, 1, -5):
        try:
            kill_group_script(pgid, 1)
        except ValueError:
            continue
        raise AssertionError(f"kill_group_script accepted process group {pgid}")
    assert "kill -TERM -4242 " in kill_group_script(4242, 1)


def _tag_of(pid: int) -> str:
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return next(e.decode()[len("C3_SHARD="):] for e in environ if e.startswith(b"C3_SHARD="))


def test_shard_stop_ends_the_foreground_start_with_exit_0(tmp_path, monkeypatch):
    """Issue 24: a deliberate `c3 shard stop` made the foreground `shard start` exit 1, like a crash.
    The stop marks each node (`~/.c3/shard/stopped-<tag>`) before it signals; the start then says
    "stopped by request" and exits 0. (Only this test's shard is stopped: by its tag.)"""
    import asyncio

    from backend.remote.node import Node
    from backend.shard.ops import stop

    monkeypatch.setenv("HOME", str(tmp_path))
    proc, log = start(tmp_path)
    try:
        pids = pids_started(log, 2, proc)
        assert len(pids) == 2, log.read_text()
        tag = _tag_of(pids[0])
        nodes = [Node(name="a", host="http://127.0.0.1:8000", ssh="u@127.0.0.1"), Node(name="b", host="http://127.0.0.2:8000", ssh="u@127.0.0.2")]
        results = asyncio.run(stop(nodes, use_ray=False, tag=tag))
        assert sum(r.stopped for r in results) >= 2 and not any(r.error for r in results)
        rc = proc.wait(timeout=60)
        text = log.read_text()
        assert rc == 0, text
        assert "c3: stopped by request (`c3 shard stop` on a, b)" in text
        assert not any(alive(p) for p in pids)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_stale_stop_marker_does_not_hide_a_crash(tmp_path, monkeypatch):
    """A marker left by an earlier stop is cleared when a start begins: a later crash still fails."""
    monkeypatch.setenv("HOME", str(tmp_path))
    markers = tmp_path / ".c3" / "shard"
    markers.mkdir(parents=True)
    for port in range(30000, 39001):  # the helper picks its port at random in this range
        (markers / f"stopped-a-{port}").write_text("")
    proc, log = start(tmp_path, FAKE_FAIL="1")
    try:
        assert proc.wait(timeout=60) == 7, log.read_text()
        assert "stopped by request" not in log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
