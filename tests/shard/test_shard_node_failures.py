"""Integration (issue 24): more `c3 shard start` failure modes on the two netns test hosts, each one real
condition ending in one error line `phase <name> failed on node <node>: …` with nothing left running, and
a rank killed while serving reported within 5 s (the engine is the stand-in vLLM, mp backend; the timing
is c3's — its foreground supervisor and `shard status` — not the engine's).

- a model path that exists on the head but not on the worker (phase model). The hosts share one file
  system; what differs between their views is /proc/self/net, which shows the reader's own network
  namespace: the head's cluster-link interface has an entry there on the head only;
- llama.cpp builds that differ between the hosts (phase versions), and an rpc-server port a firewall on
  the worker drops (phase rendezvous): stand-in llama-server / ggml-rpc-server that print a version per
  host and really listen;
- the worker's name resolving, on the head only, to 127.0.1.1 (c3 runs on the head in a mount namespace of
  its own whose /etc/hosts says so; the worker's sshd still sees the real line) (phase reach);
- a rank SIGKILLed while serving: the foreground `shard start` names it (phase serve) and `shard status`
  shows it not running, each within 5 s of the kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.shard.conftest import ROOT, stop_c3, write_script
from tests.shard.test_shard_failures import failed_in, mp_args, nothing_left, standin
from tests.support import wait_until

pytestmark = [pytest.mark.netns, pytest.mark.sshd]


def test_a_model_path_missing_on_the_worker_fails_phase_model_before_anything_starts(shard_rig):
    shard_rig.register()
    vllm = standin(shard_rig)
    model = f"/proc/self/net/dev_snmp6/{shard_rig.link_names[0]}"  # the head's link interface: there on the head only
    args = mp_args(shard_rig, vllm, 29571)
    args[args.index("--profile") + 1] = model
    r = shard_rig.c3(*args)
    line = failed_in(r.stderr, r.returncode, phase="model", node="b")
    assert line == f"c3: error: phase model failed on node b: model path {model} does not exist on b"
    assert "same path on every node" in r.stderr  # the hint
    assert "starting vllm serve" not in r.stdout
    nothing_left(shard_rig)


def rpc_standins(shard_rig, *, worker_version: str = "7000 (abc123)") -> tuple[str, str, str]:
    """llama-server (prints its build with --version; the worker's build is `worker_version`), an
    rpc-server that really listens on -H ADDR -p PORT, and a GGUF file; all on the shared file system."""
    folder = shard_rig.folder / f"llama-{worker_version.split()[0]}"
    folder.mkdir(exist_ok=True)
    llama = write_script(folder / "llama-server", (
        "#!/bin/sh\n"
        f"if ip -o -4 addr show | grep -q ' {shard_rig.worker_link}/'; then v='{worker_version}'; else v='7000 (abc123)'; fi\n"
        'case "$*" in *--version*) echo "version: $v" >&2; echo "built with cc for x86_64" >&2; exit 0;; esac\n'
        "exec sleep 600\n"))
    rpc_server = write_script(folder / "ggml-rpc-server", (
        f"#!{sys.executable}\n"
        "import socket, sys, time\n"
        "a = sys.argv\n"
        "s = socket.socket()\n"
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "s.bind((a[a.index('-H') + 1], int(a[a.index('-p') + 1])))\n"
        "s.listen()\n"
        "print('standin rpc-server listening', flush=True)\n"
        "time.sleep(600)\n"))
    model = folder / "tiny.gguf"
    model.write_bytes(b"GGUF")
    return llama, rpc_server, str(model)


def rpc_args(llama: str, rpc_server: str, model: str, rpc_port: int, *extra: str) -> list[str]:
    return ["shard", "start", "--profile", model, "--nodes", "a,b", "--backend", "rpc", "--llama-server", llama,
            "--rpc-server", rpc_server, "--rpc-port", str(rpc_port), *extra]


def test_llama_cpp_builds_that_differ_fail_phase_versions_on_the_worker(shard_rig):
    shard_rig.register()
    llama, rpc_server, model = rpc_standins(shard_rig, worker_version="6999 (def456)")
    r = shard_rig.c3(*rpc_args(llama, rpc_server, model, 50071))
    line = failed_in(r.stderr, r.returncode, phase="versions", node="b")
    assert "llama.cpp builds differ between nodes (a: version: 7000 (abc123)" in line and "b: version: 6999 (def456)" in line
    assert "starting" not in r.stdout
    nothing_left(shard_rig)


def test_an_rpc_port_the_worker_drops_fails_phase_rendezvous_on_the_worker(shard_rig):
    shard_rig.register()
    llama, rpc_server, model = rpc_standins(shard_rig)
    rule = ["INPUT", "-p", "tcp", "--dport", "50072", "-j", "DROP"]
    subprocess.run(["ip", "netns", "exec", shard_rig.worker.netns, "iptables", "-I", *rule], check=True, timeout=30)
    try:
        started = time.monotonic()
        r = shard_rig.c3(*rpc_args(llama, rpc_server, model, 50072, "--deadline", "rendezvous=5"), timeout=180)
        seconds = time.monotonic() - started
    finally:
        subprocess.run(["ip", "netns", "exec", shard_rig.worker.netns, "iptables", "-D", *rule], check=False, timeout=30)
    line = failed_in(r.stderr, r.returncode, phase="rendezvous", node="b")
    assert line.endswith(f"rpc-server on b did not accept connections on {shard_rig.worker_link}:50072 within 5s"), line
    assert "  | standin rpc-server listening" in r.stderr  # it did listen: the firewall dropped the head's connect
    assert "starting llama-server" not in r.stdout
    assert seconds < 90, seconds
    nothing_left(shard_rig)


def test_a_rank_killed_while_serving_is_reported_within_5_s(shard_rig):
    shard_rig.register()
    vllm = standin(shard_rig)
    log = shard_rig.folder / "killed-serving.log"
    proc = shard_rig.c3_background(*mp_args(shard_rig, vllm, 29573), log=log)
    seen: dict[str, float] = {}

    def watch_log() -> None:
        deadline = time.monotonic() + 120
        while "serve" not in seen and time.monotonic() < deadline:
            if "c3: error: phase serve failed on node b" in log.read_text(errors="replace"):
                seen["serve"] = time.monotonic()
            time.sleep(0.05)

    try:
        wait_until(lambda: "c3: serving: first token" in log.read_text(errors="replace"), 120, "serving", interval=0.25, proc=proc, log=log)
        r = shard_rig.c3("shard", "status", "--nodes", "a,b", "--backend", "mp", "--json")
        parts = {p["node"]: p for p in json.loads(r.stdout)["parts"]}
        assert r.returncode == 0 and parts["b"]["state"] == "running", r.stdout
        from scripts.rig.netns_cleanup import in_netns

        pid = int(parts["b"]["pid"])
        assert in_netns(pid, shard_rig.worker.netns)
        watcher = threading.Thread(target=watch_log, daemon=True)
        watcher.start()
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)

        def b_down() -> bool:
            out = shard_rig.c3("shard", "status", "--nodes", "a,b", "--backend", "mp", "--json")
            return {p["node"]: p for p in json.loads(out.stdout)["parts"]}["b"]["state"] == "not running"

        wait_until(b_down, 5, "shard status showing b's rank not running", interval=0.1)
        status_s = time.monotonic() - killed
        rc = proc.wait(timeout=120)
        watcher.join(timeout=10)
    finally:
        stop_c3(proc)
    output = log.read_text(errors="replace")
    line = failed_in(output, rc, phase="serve", node="b")
    assert "vllm serve (rank 1, headless) exited with status" in line and line.endswith("while serving"), line
    serve_s = seen["serve"] - killed
    assert serve_s < 5, serve_s
    assert status_s < 5, status_s
    print(f"rank killed while serving: shard start said so after {serve_s:.2f}s, shard status after {status_s:.2f}s")
    nothing_left(shard_rig)


def test_a_worker_name_that_resolves_to_the_head_itself_fails_phase_reach(shard_rig, tmp_path):
    shard_rig.register()
    name = shard_rig.worker.dns_name
    lines = [line for line in Path("/etc/hosts").read_text().splitlines() if name not in line.split()]
    hosts = tmp_path / "hosts"
    hosts.write_text("\n".join([*lines, f"127.0.1.1 {name}"]) + "\n")
    hosts.chmod(0o644)
    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"', str(hosts),
            *shard_rig.argv(*mp_args(shard_rig, standin(shard_rig), 29574))]
    r = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=120, cwd=ROOT, env=shard_rig.env())
    line = failed_in(r.stderr, r.returncode, phase="reach", node="b")
    assert line == (f"c3: error: phase reach failed on node b: b's name {name} resolves to 127.0.1.1 here on the head (a), "
                    "an address of this machine: b's part would run on a")
    assert f"127.0.1.1 {name}" in r.stderr  # the hint names the usual line
    assert "starting vllm serve" not in r.stdout
    assert name in Path("/etc/hosts").read_text()  # the machine's own file is untouched
    nothing_left(shard_rig)
