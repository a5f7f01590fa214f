"""Issue 24, for real across machines: `c3 shard start --backend rpc` on the two network-namespace test
hosts reached by name over real SSH — llama.cpp's own llama-server on the head (h1, where c3 runs) and
its ggml-rpc-server on the worker (h2), bound to the worker's cluster-link address only.

Proven: the rpc-server listens on the link address and nowhere else; the weights land on the worker (the
head's load log names its `RPC[LINK:PORT]` buffer, and the worker process's memory grows once the model
is loaded); completions are answered through the head; `c3 shard status --backend rpc` lists both parts
and reports a SIGKILLed worker within 5 s, naming its node; `c3 shard stop` leaves nothing on either host.
(tests/real_engine/test_shard_rpc_real.py proves the same on loopback with three local nodes.)"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.shard.conftest import API_PORT, ROOT, get_in, parts_of
from tests.support import wait_until

pytestmark = [pytest.mark.real_engine, pytest.mark.netns, pytest.mark.sshd]
RPC_PORT = 50070


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def idle_rpc_server_kib(binary: Path) -> int:
    """RSS of the same ggml-rpc-server with nothing loaded (on loopback, stopped again): the baseline the
    worker's memory is compared with (the head loads in well under a second, before a poll can see it idle).
    Ready is its port accepting a connection (its stdout is block-buffered into a pipe: never read)."""
    import socket
    import subprocess

    from scripts.rig.engine_procs import free_port

    port = free_port()
    proc = subprocess.Popen([str(binary), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def accepts() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False

        wait_until(accepts, 30, "an idle ggml-rpc-server listening", interval=0.1, proc=proc)
        time.sleep(0.3)
        return rss_kib(proc.pid)
    finally:
        proc.kill()
        proc.wait(timeout=30)


def live_view(rig, seen: list) -> dict | None:
    """The newest shard as the cockpit's Shards section gets it (`backend.views.shard.live_shards`), read in a
    c3 process with the rig's environment (the runner's record is under its state folder)."""
    code = "import json; from backend.views.shard import live_shards; print(json.dumps([s.model_dump(mode='json') for s in live_shards()]))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, cwd=ROOT, env=rig.env())
    shards = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else []
    seen.append(shards or (done.returncode, done.stderr[-800:]))
    return shards[0] if shards else None


@pytest.mark.timeout(900)
def test_llama_cpp_rpc_over_two_hosts_puts_weights_on_the_worker_and_reports_a_killed_worker(shard_rig, real_engines):
    shard_rig.register()
    log = shard_rig.folder / "rpc-hosts.log"
    proc = shard_rig.c3_background(
        "shard", "start", "--backend", "rpc", "--nodes", "a,b", "--profile", f"{real_engines.gguf} -c 512 -t 1 --alias tiny -v",
        "--rpc-port", str(RPC_PORT), "--llama-server", str(real_engines.llama_server), "--rpc-server", str(real_engines.rpc_server),
        log=log,
    )
    # llama-server listens on the head's cluster-link address, which only the hosts reach.
    base = f"http://{shard_rig.head_link}:{API_PORT}/v1"
    link = shard_rig.worker_link
    try:
        # The worker's rpc-server comes up first, bound to the link address alone (never 0.0.0.0).
        status = wait_until(lambda: (s := parts_of(shard_rig, "rpc", "--rpc-port", str(RPC_PORT)))[1].get("b", {}).get("pid") and s, 120,
                            "the worker's rpc-server", interval=0.5, proc=proc, log=log)
        worker_pid = int(status[1]["b"]["pid"])
        argv = Path(f"/proc/{worker_pid}/cmdline").read_bytes().split(b"\0")
        assert argv[argv.index(b"-H") + 1].decode() == link and argv[argv.index(b"-p") + 1].decode() == str(RPC_PORT)
        idle_kib = idle_rpc_server_kib(real_engines.rpc_server)

        wait_until(lambda: get_in(shard_rig, f"{base}/models"), 300, "llama-server serving through the worker", interval=0.5, proc=proc, log=log)
        text = log.read_text(errors="replace")
        assert "no authentication" in text
        # llama.cpp's load log: `RPC0[LINK:PORT] model buffer size = 0.56 MiB` — weights on the worker.
        sizes = [float(s) for s in re.findall(rf"RPC\d*\[{re.escape(link)}:{RPC_PORT}\] model buffer size\s*=\s*([\d.]+) MiB", text)]
        assert sizes and max(sizes) > 0, (sizes, text[-4000:])
        loaded_kib = rss_kib(worker_pid)
        assert loaded_kib - idle_kib >= max(sizes) * 1024 * 0.5, (idle_kib, loaded_kib, sizes)

        answer = get_in(shard_rig, f"{base}/completions", {"model": "tiny", "prompt": "Hello", "max_tokens": 4}, timeout=60)
        assert answer and answer["choices"], answer

        rc, seen = parts_of(shard_rig, "rpc", "--rpc-port", str(RPC_PORT))
        assert rc == 0 and seen["a"]["state"] == "running" and seen["b"]["state"] == "running", seen

        from scripts.rig.netns_cleanup import in_netns

        assert in_netns(worker_pid, shard_rig.worker.netns)
        os.kill(worker_pid, signal.SIGKILL)
        killed = time.monotonic()
        rc, seen = wait_until(lambda: (s := parts_of(shard_rig, "rpc", "--rpc-port", str(RPC_PORT)))[1]["b"]["state"] == "not running" and s,
                              5, "the killed worker reported")
        reported_s = time.monotonic() - killed
        assert rc == 1 and seen["b"]["part"] == f"rpc-server port {RPC_PORT}"
        # What the cockpit's Shards section reads (the facade's `live_shards`, from the runner's record): the
        # worker's part dead on b within 5 s of the kill — degraded while the head still runs, or, once the
        # foreground runner has stopped the rest (it sees the kill within a second), stopped with why, naming b.
        views: list = []

        def worker_dead(view: dict | None) -> bool:
            return view is not None and any(r["node"] == "b" and r["state"] == "dead" for r in view["ranks"])

        while not worker_dead(shown := live_view(shard_rig, views)):
            assert time.monotonic() - killed < 5, f"the cockpit's view did not show the killed worker within 5 s: {views[-1:]}"
            time.sleep(0.2)
        shown_s = time.monotonic() - killed
        assert shown is not None and shown["headline"] in ("degraded", "stopped"), shown
        assert shown["headline"] == "degraded" or "failed on node b" in shown["detail"], shown

        stop = shard_rig.c3("shard", "stop", f"a-{RPC_PORT}", "--nodes", "a,b", "--backend", "rpc")
        assert stop.returncode == 0, stop.stdout + stop.stderr
        proc.wait(timeout=120)
        wait_until(lambda: shard_rig.leftovers() == {shard_rig.head.name: [], shard_rig.worker.name: []}, 60, "no process left in either host",
                   interval=0.5)
        print(f"llama.cpp rpc over two hosts: worker RSS {idle_kib} -> {loaded_kib} KiB after load ({max(sizes)} MiB buffer); "
              f"killed worker reported in {reported_s:.1f}s (c3 shard status), {shown_s:.1f}s (the cockpit's view)")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=120)
        shard_rig.kill_leftovers()
