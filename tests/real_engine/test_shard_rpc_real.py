"""Issue 24, for real: `c3 shard start --backend rpc` with llama.cpp's own llama-server and two
ggml-rpc-servers (built with -DGGML_RPC=ON by the rig). All three nodes are this machine, registered as
local nodes, on loopback (as llama.cpp's CI runs two CPU rpc-servers): the local-node path, no netns
hosts (they cannot run the host's binaries), and no traffic off loopback.

Proven: the weights land on the workers (the head's load log names each `RPC[127.0.0.1:PORT]` buffer),
a completion is answered through the head's OpenAI endpoint, a killed worker rpc-server is reported by
`c3 shard status` within 5 s naming its node, and `c3 shard stop` leaves no tagged process behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from scripts.rig.engine_procs import free_port, free_port_run

# `c3 shard stop` on local nodes reads this machine's /proc, where the network-namespace test hosts' shard ranks
# are too (one pid namespace): a cold CI's tp2/pp2 vLLM shard was "stopped by request" by this test's stop. It
# stops by its tag now (only this test's shard); still in the netns group, so a test-host shard never shares the CPUs.
pytestmark = [pytest.mark.real_engine, pytest.mark.xdist_group("netns")]
ROOT = Path(__file__).resolve().parents[2]
NODES = "h,w1,w2"


def _c3(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "c3", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def _tagged(tag: str) -> list[int]:
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"C3_SHARD={tag}".encode() in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found


def _wait_for(log: Path, pattern: str, proc: subprocess.Popen, deadline_s: float) -> str:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if re.search(pattern, text) or proc.poll() is not None:
            return text
        time.sleep(0.2)
    return log.read_text(errors="replace")


def test_rpc_shard_splits_the_model_over_two_rpc_servers(real_engines, tmp_path):
    from backend.nodes.registry import add_node

    for name in NODES.split(","):
        add_node(name, "http://127.0.0.1:18000", "me@127.0.0.1", local=True)
    api = free_port()
    rpc = free_port_run(2)  # one rpc-server per worker, on --rpc-port and the port after it
    tag = f"h-{rpc}"
    log = tmp_path / "shard.log"
    argv = [sys.executable, "-m", "c3", "shard", "start", "--backend", "rpc", "--nodes", NODES,
            "--profile", f"{real_engines.gguf} -c 512 -t 1 --alias tiny -v",
            "--head-address", "127.0.0.1", "--port", str(api), "--rpc-port", str(rpc),
            "--llama-server", str(real_engines.llama_server), "--rpc-server", str(real_engines.rpc_server)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        text = _wait_for(log, r"c3: ready: ", proc, 180)
        assert "c3: ready: " in text, text[-4000:]
        assert "no authentication" in text
        for port in (rpc, rpc + 1):
            # llama.cpp's load log: `RPC0[127.0.0.1:PORT] model buffer size = 0.56 MiB` — weights on that worker
            # (the first such line, of llama.cpp's own fit pass, says 0.00; the real load's is not zero).
            sizes = [float(s) for s in re.findall(rf"RPC\d*\[127\.0\.0\.1:{port}\] model buffer size\s*=\s*([\d.]+) MiB", text)]
            assert sizes and max(sizes) > 0, (port, sizes, text[-4000:])

        body = json.dumps({"model": "tiny", "prompt": "Hello", "max_tokens": 4}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{api}/v1/completions", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            assert answer.status == 200 and json.loads(answer.read())["choices"]

        up = _c3("shard", "status", "--backend", "rpc", "--rpc-port", str(rpc), "--nodes", NODES, "--json")
        assert up.returncode == 0, up.stdout + up.stderr
        parts = {p["node"]: p for p in json.loads(up.stdout)["parts"]}
        assert [parts[n]["state"] for n in ("h", "w1", "w2")] == ["running"] * 3, parts

        os.kill(int(parts["w1"]["pid"]), signal.SIGKILL)
        killed = time.monotonic()
        down = _c3("shard", "status", "--backend", "rpc", "--rpc-port", str(rpc), "--nodes", NODES)
        assert time.monotonic() - killed < 5
        assert down.returncode == 1, down.stdout + down.stderr
        assert f"w1: rpc-server port {rpc}: not running" in down.stdout, down.stdout
        assert "rpc-server port" in down.stderr and "on w1" in down.stderr

        stopped = _c3("shard", "stop", tag, "--backend", "rpc", "--nodes", NODES, timeout=120)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        proc.wait(timeout=120)
        assert _tagged(tag) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
        for pid in _tagged(tag):
            os.kill(pid, signal.SIGKILL)
