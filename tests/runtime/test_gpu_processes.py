"""Who holds each GPU: NVML's compute processes mapped to pods, foreign ones flagged, a misplaced pod
shown on the GPU it really uses; user and command read from the real /proc."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from datetime import UTC, datetime

from backend.models import ComputeProcess, Gpu, GpuSnapshot, Pod
from backend.runtime.gpu_processes import proc_identity, process_rows
from tests.support import wait_until

GPUS = [Gpu(index=i, uuid=f"GPU-{i}", name="NVIDIA GeForce RTX 3090", total_mib=24576) for i in range(3)]
NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)


def snaps(*procs: tuple[int, int, int]) -> list[GpuSnapshot]:
    """(gpu index, pid, MiB) triples → one reading per GPU."""
    return [GpuSnapshot(gpu=g, taken_at=NOW, processes=tuple(ComputeProcess(pid=pid, gpu_uuid=g.uuid, used_mib=mib) for i, pid, mib in procs if i == g.index))
            for g in GPUS]


def test_rows_map_pods_flag_foreign_and_misplaced():
    pods = [Pod(name="chat", slug="custom/stub", gpus=(0,), port=1), Pod(name="odd", slug="custom/stub", gpus=(1,), port=2)]
    owners = {100: "chat", 200: "odd", 300: None}
    rows = process_rows(snaps((0, 100, 9000), (0, 200, 4000), (2, 300, 512)), pods, lambda pids: {p: owners.get(p) for p in pids},
                        identity=lambda pid: ("me", f"cmd {pid}"))
    assert [(r.gpu_index, r.pid, r.pod) for r in rows] == [(0, 100, "chat"), (0, 200, "odd"), (2, 300, None)]
    chat, odd, stranger = rows
    assert not chat.foreign and not chat.misplaced
    assert odd.misplaced and odd.planned_gpus == (1,) and odd.gpu_index == 0  # shown on the GPU it really uses
    assert stranger.foreign and not stranger.misplaced and stranger.used_mib == 512
    assert odd.row()["misplaced"] is True and stranger.row()["foreign"] is True and chat.row()["command"] == "cmd 100"


def test_no_processes_asks_no_owners():
    def owners(_pids):
        raise AssertionError("owners() called without processes")

    assert process_rows(snaps(), [], owners) == []


def test_identity_from_the_real_proc():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "marker-arg"])
    try:
        wait_until(lambda: "marker-arg" in (proc_identity(child.pid)[1] or ""), timeout=10, what="the child's exec")
        user, command = proc_identity(child.pid)
        assert user == pwd.getpwuid(os.getuid()).pw_name
        assert command is not None and command.endswith("marker-arg") and "time.sleep(30)" in command
    finally:
        child.kill()
        child.wait()
    assert proc_identity(child.pid) == (None, None)  # gone: no guess


def test_credentials_in_a_command_line_never_show():
    from backend.runtime.gpu_processes import redact_argv

    argv = ["vllm", "serve", "Qwen/Qwen3-8B", "--api-key", "s3cret-value", "--hf-token=hf_abcdefghijklmnop", "--max-num-batched-tokens", "4096",
            "--download-dir", "https://user:pw@mirror.example/models", "sk-ABCDEFGHIJKLMNOP"]
    shown = redact_argv(argv)
    for secret in ("s3cret-value", "hf_abcdefghijklmnop", "user:pw", "sk-ABCDEFGHIJKLMNOP"):
        assert secret not in shown
    assert "--api-key *** --hf-token=***" in shown and "--max-num-batched-tokens 4096" in shown  # a number of tokens is no secret


def test_a_real_process_with_an_api_key_shows_it_hidden():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "--api-key", "very-secret-key-123"])
    try:
        wait_until(lambda: "--api-key" in (proc_identity(child.pid)[1] or ""), timeout=10, what="the child's exec")
        _user, command = proc_identity(child.pid)
        assert "very-secret-key-123" not in command and command.endswith("--api-key ***")
    finally:
        child.kill()
        child.wait()
