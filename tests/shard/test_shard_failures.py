"""Integration (issue 24): `c3 shard start` failure modes produced for real on the two netns test hosts.

Each test makes one real condition (a process holding a port, a firewall rule inside a host's
namespace, a SIGKILL of a rank while it loads, a host key that is not the one trusted, a server that
never answers) and checks the one error line `phase <name> failed on node <node>: <reason>`, the
node's last lines where it printed any, the exit code, and that nothing is left on either host.
The engine is the stand-in vllm (tests/shard/standin_vllm.py) with the mp backend.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.shard.conftest import API_PORT, stop_c3, write_script
from tests.support import wait_until

pytestmark = [pytest.mark.netns, pytest.mark.sshd]

STANDIN = Path(__file__).with_name("standin_vllm.py")


def standin(shard_rig, *, load_s: float = 0, completion: str = "answer") -> str:
    """The stand-in `vllm` (mp needs no Ray); with `load_s`, rank 0 "loads weights" that long before it serves;
    `completion` "fail" or "hang" makes its completions fail or never answer."""
    name = f"vllm-load{int(load_s)}-{completion}"
    prefix = f"STANDIN_LOAD_S = {load_s!r}\nSTANDIN_COMPLETION = {completion!r}\n"
    # This test run's own interpreter (on the shared file system, so on both hosts): mp imports no Ray, and the
    # Ray venv (`shard_rig.python`) exists only once a Ray test's fixture has built it.
    return write_script(shard_rig.folder / name, f"#!{sys.executable}\n{prefix}" + STANDIN.read_text())


def mp_args(shard_rig, vllm: str, master_port: int, *extra: str) -> list[str]:
    return ["shard", "start", "--profile", "org/tiny-model", "--nodes", "a,b", "--backend", "mp", "--tp", "1", "--pp", "2",
            "--gpus-per-node", "1", "--vllm", vllm, "--master-port", str(master_port), *extra]


def failed_in(output: str, returncode: int, *, phase: str, node: str, code: int = 1) -> str:
    """The error line of a phase failure; checks exit code, no traceback, and the line's shape."""
    assert returncode == code, output[-4000:]
    assert "Traceback" not in output, output[-4000:]
    lines = [line for line in output.splitlines() if line.startswith("c3: error: ")]
    assert len(lines) == 1, output[-4000:]
    assert lines[0].startswith(f"c3: error: phase {phase} failed on node {node}: "), output[-4000:]
    return lines[0]


def nothing_left(shard_rig) -> None:
    wait_until(lambda: shard_rig.leftovers() == {shard_rig.head.name: [], shard_rig.worker.name: []}, 30,
               "no process left in either host", interval=0.25)


def hold_port(shard_rig, address: str, port: int) -> subprocess.Popen:
    """A real listener on address:port inside the head's namespace (stopped by the caller, by its pid)."""
    # SO_REUSEADDR as c3's own check and the engines use: an earlier test's server on the same port leaves TIME_WAIT
    # connections behind, which refuse a plain bind (seen: "Address already in use" after the mp shard tests).
    code = ("import socket,sys,time\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            "s.bind((sys.argv[1], int(sys.argv[2])))\ns.listen()\n"
            "print('listening', flush=True)\ntime.sleep(600)\n")
    proc = subprocess.Popen(["nsenter", f"--net=/var/run/netns/{shard_rig.head.netns}", sys.executable, "-c", code, address, str(port)],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "listening"
    return proc


def release(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait(timeout=30)


def test_a_port_taken_on_the_head_fails_phase_ports(shard_rig):
    shard_rig.register()
    vllm = standin(shard_rig)

    def start_with_held(address: str, port: int, master_port: int):
        holder = hold_port(shard_rig, address, port)
        try:
            return shard_rig.c3(*mp_args(shard_rig, vllm, master_port))
        finally:
            release(holder)

    r = start_with_held("0.0.0.0", API_PORT, 29561)
    line = failed_in(r.stderr, r.returncode, phase="ports", node="a")
    assert f"API port {API_PORT} on 0.0.0.0 is not free on the head (Address already in use)" in line
    # The rendezvous port, held on the head's cluster-link address.
    r = start_with_held(shard_rig.head_link, 29562, 29562)
    line = failed_in(r.stderr, r.returncode, phase="ports", node="a")
    assert f"rendezvous port 29562 on {shard_rig.head_link} is not free on the head" in line
    assert "c3 shard status" in r.stderr  # the hint
    nothing_left(shard_rig)


def test_a_firewall_between_the_hosts_fails_phase_link_on_the_worker(shard_rig):
    shard_rig.register()
    vllm = standin(shard_rig)
    rule = ["OUTPUT", "-p", "tcp", "-d", shard_rig.head_link, "--dport", "29563", "-j", "DROP"]
    subprocess.run(["ip", "netns", "exec", shard_rig.worker.netns, "iptables", "-I", *rule], check=True, timeout=30)
    try:
        started = time.monotonic()
        r = shard_rig.c3(*mp_args(shard_rig, vllm, 29563))
        seconds = time.monotonic() - started
    finally:
        subprocess.run(["ip", "netns", "exec", shard_rig.worker.netns, "iptables", "-D", *rule], check=False, timeout=30)
    line = failed_in(r.stderr, r.returncode, phase="link", node="b")
    assert f"head address {shard_rig.head_link}:29563 is not reachable from b" in line
    assert "TCP connect failed: timed out" in line  # DROP: the SYN goes unanswered
    assert "firewall" in r.stderr  # the hint names the usual cause
    assert "starting vllm serve" not in r.stdout  # refused before anything started
    assert seconds < 60, seconds
    nothing_left(shard_rig)


def test_a_worker_killed_while_loading_fails_phase_load_and_stops_everything(shard_rig):
    shard_rig.register()
    vllm = standin(shard_rig, load_s=600)
    log = shard_rig.folder / "killed-worker.log"
    proc = shard_rig.c3_background(*mp_args(shard_rig, vllm, 29564), log=log)
    try:
        wait_until(lambda: "standin: loading weights (600 s)" in log.read_text(errors="replace"), 120, "rank 0 loading",
                   interval=0.25, proc=proc, log=log)

        def rank1() -> int | None:
            procs = shard_rig.netns_pids()[shard_rig.worker.name]
            return next((pid for pid, cmd in procs if cmd.startswith(sys.executable) and vllm in cmd and "--node-rank 1" in cmd), None)

        pid = wait_until(rank1, 30, "rank 1's process on the worker", interval=0.25)
        os.kill(pid, signal.SIGKILL)  # a real kill of the worker's rank during load
        rc = proc.wait(timeout=120)
    finally:
        stop_c3(proc)
    output = log.read_text(errors="replace")
    line = failed_in(output, rc, phase="load", node="b")
    assert "vllm serve (rank 1, headless) exited with status" in line and "before the server answered" in line
    # b's own last lines come with the error, after the whole shard was stopped.
    tail = output[output.index("c3: last lines from b:"):]
    assert "  | standin: rank 1 loading weights" in tail
    assert output.index("every node's part is stopped") < output.index("c3: error: phase load")
    nothing_left(shard_rig)


def test_a_server_that_never_answers_fails_phase_load_at_its_deadline(shard_rig):
    shard_rig.register()
    vllm = standin(shard_rig, load_s=600)
    started = time.monotonic()
    r = shard_rig.c3(*mp_args(shard_rig, vllm, 29565, "--deadline", "load=8"), timeout=180)
    seconds = time.monotonic() - started
    line = failed_in(r.stderr, r.returncode, phase="load", node="a")
    assert f"http://{shard_rig.head_link}:{API_PORT}/v1/models did not answer within 8s" in line or "/models did not answer within 8s" in line
    assert "c3: last lines from a:" in r.stderr and "  | standin: loading weights (600 s)" in r.stderr
    assert "--deadline load=SECONDS" in r.stderr  # the hint
    assert seconds < 90, seconds
    nothing_left(shard_rig)


def test_a_changed_host_key_fails_phase_reach_with_exit_3(shard_rig, tmp_path):
    shard_rig.register()
    vllm = standin(shard_rig)
    # The worker now presents a key other than the one trusted: c3's known_hosts holds another key
    # under its name and address (the rig's own file stays as it is).
    other = tmp_path / "other_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True, timeout=30)
    kind, key = Path(f"{other}.pub").read_text().split()[:2]
    w = shard_rig.worker
    lines = []
    for line in shard_rig.rig.known_hosts.read_text().splitlines():
        hosts = line.split()[0].split(",") if line.strip() else []
        lines.append(f"{line.split()[0]} {kind} {key}" if w.address in hosts or w.dns_name in hosts else line)
    changed = tmp_path / "known_hosts"
    changed.write_text("\n".join(lines) + "\n")
    r = shard_rig.c3(*mp_args(shard_rig, vllm, 29566), C3_KNOWN_HOSTS=str(changed))
    line = failed_in(r.stderr, r.returncode, phase="reach", node="b", code=3)
    assert "host key mismatch" in line and "man-in-the-middle" in line
    assert "starting vllm serve" not in r.stdout
    nothing_left(shard_rig)


def test_a_server_whose_first_completion_fails_fails_phase_first_token(shard_rig):
    """/models answers, the first completion does not (vLLM's EngineDeadError answer): not serving."""
    shard_rig.register()
    vllm = standin(shard_rig, completion="fail")
    r = shard_rig.c3(*mp_args(shard_rig, vllm, 29567), timeout=180)
    line = failed_in(r.stderr, r.returncode, phase="first_token", node="a")
    assert line.endswith(f"http://{shard_rig.head_link}:{API_PORT}/v1/completions answered HTTP 500: EngineCore encountered an issue. "
                         "See stack trace (above) for the root cause."), line
    assert "c3: ready: " in r.stdout and "c3: serving:" not in r.stdout
    assert "  | standin: completion asked (fail)" in r.stderr
    nothing_left(shard_rig)
