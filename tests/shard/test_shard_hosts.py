"""Integration: `c3 shard` on two test hosts in network namespaces, over real SSH, with real Ray.

The head's part runs locally (c3 runs inside h1's namespace); h2 is driven over SSH. Every refusal
happens before anything starts, so each of those tests also checks that nothing is left running.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from pathlib import Path

import pytest

from tests.shard.conftest import API_PORT, RAY_PORT, RAY_VERSION, stop_c3, write_script
from tests.support import wait_until

pytestmark = [pytest.mark.netns, pytest.mark.sshd]

SECRET = "hf_c3_test_secret_value_123"
STANDIN = Path(__file__).with_name("standin_vllm.py")


def standin(shard_rig) -> str:
    """The stand-in `vllm`, run by the Ray venv's interpreter (it imports ray)."""
    return write_script(shard_rig.folder / "vllm", f"#!{shard_rig.python}\n" + STANDIN.read_text())


def refused(result) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("c3: error: "), result.stderr
    return result.stderr


def assert_nothing_running(shard_rig) -> None:
    left = shard_rig.leftovers()
    assert left == {shard_rig.head.name: [], shard_rig.worker.name: []}, left


def get_models(address: str) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://{address}:{API_PORT}/v1/models", timeout=3) as r:
            return json.loads(r.read())
    except (OSError, ValueError):
        return None


# --- install-ray ------------------------------------------------------------------------------------


def test_install_ray_installs_the_same_version_on_every_node(shard_rig, ray_installed):
    result, seconds = ray_installed
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    # It shows what it runs, node by node, then checks the version on each.
    assert f"[a] $ {shard_rig.python} -m pip install" in out and f"'ray[default]=={RAY_VERSION}'" in out
    assert f"[b] $ {shard_rig.python} -m pip install" in out
    assert f"[a] ray {RAY_VERSION} ready" in out and f"[b] ray {RAY_VERSION} ready" in out
    print(f"install-ray on 2 nodes: {seconds:.1f}s")


def test_install_ray_refuses_a_bad_version(shard_rig):
    shard_rig.register()
    r = shard_rig.c3("shard", "install-ray", "--nodes", "a,b", "--ray-version", "latest; rm -rf /")
    assert r.returncode == 2 and "is not a version" in r.stderr


# --- refusals and dry-run (nothing starts) ----------------------------------------------------------


def test_dry_run_shows_each_node_address_interface_and_hides_secrets(shard_rig, ray_installed):
    shard_rig.register()
    vllm = standin(shard_rig)
    r = shard_rig.c3("shard", "start", "--profile", "org/model --max-model-len 512", "--nodes", "a,b", "--tp", "1", "--pp", "2",
                     "--gpus-per-node", "1", "--ray", shard_rig.ray, "--vllm", vllm, "--ray-port", str(RAY_PORT), "--dry-run",
                     HF_TOKEN=SECRET)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    a_if, b_if = shard_rig.link_names
    assert f"head a at {shard_rig.head_link} (Ray GCS port {RAY_PORT})" in out
    assert f"[a] head (rank 0), local, address {shard_rig.head_link} on {a_if}" in out
    assert f"[b] worker (rank 1), ssh root@{shard_rig.worker.dns_name}:22, address {shard_rig.worker_link} on {b_if}" in out
    assert f"VLLM_HOST_IP={shard_rig.worker_link} NCCL_SOCKET_IFNAME={b_if} GLOO_SOCKET_IFNAME={b_if}" in out
    assert f"--address={shard_rig.head_link}:{RAY_PORT}" in out
    assert "--tensor-parallel-size 1 --pipeline-parallel-size 2 --distributed-executor-backend ray" in out
    assert "Python" in out and "reachable from b" in out
    assert SECRET not in out + r.stderr and "HF_TOKEN=<hidden>" in out
    assert str(shard_rig.rig.client_key) not in out
    assert_nothing_running(shard_rig)


def test_refuses_tp_pp_not_matching_gpus(shard_rig, ray_installed):
    shard_rig.register()
    common = ("--profile", "org/model", "--nodes", "a,b", "--ray", shard_rig.ray, "--vllm", standin(shard_rig))
    err = refused(shard_rig.c3("shard", "start", *common, "--tp", "2", "--pp", "2", "--gpus-per-node", "1"))
    assert "--tp 2 × --pp 2 = 4 GPUs, but the nodes have 2 (a: 1, b: 1)" in err
    # Asked for real: the test hosts have no nvidia-smi, so each counts 0 and the hint says what to do.
    err = refused(shard_rig.c3("shard", "start", *common))
    assert "--tp 1 × --pp 2 = 2 GPUs, but the nodes have 0 (a: 0, b: 0)" in err and "--gpus-per-node" in err
    assert_nothing_running(shard_rig)


def test_refuses_mp_without_head_first(shard_rig):
    shard_rig.register()
    err = refused(shard_rig.c3("shard", "start", "--profile", "org/model", "--nodes", "a,b", "--backend", "mp", "--head", "b",
                               "--gpus-per-node", "1"))
    assert "--backend mp needs the head first in --nodes: head is b, but --nodes starts with a" in err


def test_refuses_unreachable_head_address(shard_rig, ray_installed):
    shard_rig.register()
    # h1's management address: h2 has no route to it (only the cluster link joins them).
    err = refused(shard_rig.c3("shard", "start", "--profile", "org/model", "--nodes", "a,b", "--gpus-per-node", "1",
                               "--ray", shard_rig.ray, "--vllm", standin(shard_rig), "--head-address", shard_rig.head.address))
    assert f"c3: error: phase link failed on node b: head address {shard_rig.head.address}:6379 is not reachable from b" in err
    assert "unreachable" in err.lower()


def test_refuses_ray_or_python_versions_that_differ(shard_rig, ray_installed):
    shard_rig.register()
    marker = f" {shard_rig.worker_link}/"
    old_ray = write_script(shard_rig.folder / "ray-old-on-b", "#!/bin/sh\n"
                           f"if ip -o -4 addr show | grep -q '{marker}'; then echo 'ray, version 2.49.1'; exit 0; fi\n"
                           f"exec {shard_rig.ray} \"$@\"\n")
    common = ("--profile", "org/model", "--nodes", "a,b", "--gpus-per-node", "1", "--vllm", standin(shard_rig))
    err = refused(shard_rig.c3("shard", "start", *common, "--ray", old_ray))
    assert f"c3: error: phase versions failed on node b: Ray versions differ between nodes (a: {RAY_VERSION}, b: 2.49.1)" in err
    old_py = write_script(shard_rig.folder / "python-old-on-b", "#!/bin/sh\n"
                          f"if ip -o -4 addr show | grep -q '{marker}'; then echo '3.10.4'; exit 0; fi\n"
                          f"exec {shard_rig.python} \"$@\"\n")
    err = refused(shard_rig.c3("shard", "start", *common, "--ray", shard_rig.ray, "--python", old_py))
    assert "phase versions failed on node b: Python versions differ between nodes (a: 3." in err and "b: 3.10.4)" in err
    assert_nothing_running(shard_rig)


def test_refuses_stop_services_without_passwordless_sudo(shard_rig, ray_installed):
    shard_rig.register()
    # On the head c3 runs with a PATH we control: its `sudo` wants a password, as on a default install.
    bin_dir = shard_rig.folder / "nosudo-bin"
    bin_dir.mkdir(exist_ok=True)
    write_script(bin_dir / "sudo", "#!/bin/sh\necho 'sudo: a password is required' >&2\nexit 1\n")
    import os

    err = refused(shard_rig.c3("shard", "start", "--profile", "org/model", "--nodes", "a,b", "--gpus-per-node", "1",
                               "--ray", shard_rig.ray, "--vllm", standin(shard_rig), "--stop-services",
                               PATH=f"{bin_dir}:{os.environ['PATH']}"))
    assert "--stop-services needs passwordless sudo, which a" in err and "a: sudo: a password is required" in err
    assert_nothing_running(shard_rig)


# --- real runs ---------------------------------------------------------------------------------------


def test_ray_shard_starts_across_both_hosts_shows_in_status_and_ctrl_c_leaves_nothing(shard_rig, ray_installed):
    shard_rig.register()
    log = shard_rig.folder / "ray-start.log"
    a_if, b_if = shard_rig.link_names
    proc = shard_rig.c3_background(
        "shard", "start", "--profile", "org/tiny-model", "--nodes", "a,b", "--gpus-per-node", "1",
        "--ray", shard_rig.ray, "--vllm", standin(shard_rig), "--ray-port", str(RAY_PORT), log=log, HF_TOKEN=SECRET,
    )
    try:
        started = time.monotonic()
        models = wait_until(lambda: get_models(shard_rig.head.address), 240, "stand-in vllm serving", interval=0.25, proc=proc, log=log)
        ready_s = time.monotonic() - started
        info = models["c3_standin"]
        assert models["data"][0]["id"] == "org/tiny-model"
        # vLLM's view: both nodes in Ray, one GPU each, and a worker task ran on each node.
        assert sorted((n["address"], n["GPU"]) for n in info["ray_nodes"]) == [(shard_rig.head_link, 1.0), (shard_rig.worker_link, 1.0)]
        assert sorted(w["ip"] for w in info["workers"]) == [shard_rig.head_link, shard_rig.worker_link]
        # Per-node address and interface reached the processes on each node (through each node's Ray).
        by_ip = {w["ip"]: w for w in info["workers"]}
        assert (by_ip[shard_rig.worker_link]["vllm_host_ip"], by_ip[shard_rig.worker_link]["nccl"]) == (shard_rig.worker_link, b_if)
        assert (by_ip[shard_rig.head_link]["vllm_host_ip"], by_ip[shard_rig.head_link]["nccl"]) == (shard_rig.head_link, a_if)
        assert info["env"]["VLLM_HOST_IP"] == shard_rig.head_link and info["env"]["GLOO_SOCKET_IFNAME"] == a_if
        assert info["env"]["RAY_ADDRESS"] == f"{shard_rig.head_link}:{RAY_PORT}"
        assert info["hf_token_seen"] is True
        running = shard_rig.netns_pids()
        assert any("raylet" in cmd for _, cmd in running[shard_rig.head.name])
        assert any("raylet" in cmd for _, cmd in running[shard_rig.worker.name])
        assert not any(SECRET in cmd for procs in running.values() for _, cmd in procs)

        t_status = time.monotonic()
        status = shard_rig.c3("shard", "status", "--nodes", "a,b", "--ray", shard_rig.ray, "--json")
        assert status.returncode == 0, status.stderr
        data = json.loads(status.stdout)
        assert len(data["ray_nodes"]) == 2 and data["ray_error"] is None
        nodes = {n["node"]: n for n in data["nodes"]}
        assert nodes["a"]["ray_address"] == shard_rig.head_link and nodes["b"]["ray_address"] == shard_rig.worker_link
        assert nodes["a"]["ray_resources"]["GPU"] == 1.0 and nodes["b"]["ray_resources"]["GPU"] == 1.0
        assert nodes["a"]["processes"] and nodes["b"]["processes"]
        text = shard_rig.c3("shard", "status", "--nodes", "a,b", "--ray", shard_rig.ray)
        assert "ray: 2 node(s) alive" in text.stdout and f"b: in the Ray cluster at {shard_rig.worker_link}" in text.stdout

        status_s = time.monotonic() - t_status
        t_stop = time.monotonic()
        proc.send_signal(signal.SIGINT)  # what Ctrl+C does
        rc = proc.wait(timeout=120)
        stop_s = time.monotonic() - t_stop
        output = log.read_text(errors="replace")
        assert rc == 130, output[-3000:]
        assert "every node's part is stopped" in output
        assert SECRET not in output
        wait_until(lambda: shard_rig.leftovers() == {shard_rig.head.name: [], shard_rig.worker.name: []}, 30, "no process left in either host", interval=0.25)
        print(f"ray shard: serving {ready_s:.1f}s after start; two status calls {status_s:.1f}s; Ctrl+C to all stopped {stop_s:.1f}s")
    finally:
        stop_c3(proc)


def test_mp_shard_every_rank_gets_its_command_and_shard_stop_cleans_up(shard_rig, ray_installed):
    shard_rig.register()
    log = shard_rig.folder / "mp-start.log"
    a_if, b_if = shard_rig.link_names
    proc = shard_rig.c3_background(
        "shard", "start", "--profile", "org/tiny-model --max-model-len 512", "--nodes", "a,b", "--backend", "mp",
        "--tp", "1", "--pp", "2", "--gpus-per-node", "1", "--vllm", standin(shard_rig), "--master-port", "29555",
        log=log, HF_TOKEN=SECRET,
    )
    try:
        models = wait_until(lambda: get_models(shard_rig.head.address), 120, "stand-in vllm (mp) serving", interval=0.25, proc=proc, log=log)
        info = models["c3_standin"]
        head_argv = info["argv"]
        common = ["serve", "org/tiny-model", "--tensor-parallel-size", "1", "--pipeline-parallel-size", "2",
                  "--distributed-executor-backend", "mp", "--nnodes", "2"]
        master = ["--master-addr", shard_rig.head_link, "--master-port", "29555"]
        assert head_argv == common + ["--node-rank", "0", *master, "--port", str(API_PORT), "--max-model-len", "512"]
        (rank1,) = info["ranks"]
        assert rank1["argv"] == common + ["--node-rank", "1", *master, "--headless", "--max-model-len", "512"]
        assert rank1["env"]["VLLM_HOST_IP"] == shard_rig.worker_link and rank1["env"]["NCCL_SOCKET_IFNAME"] == b_if
        assert rank1["env"]["MASTER_ADDR"] == shard_rig.head_link and rank1["hf_token_seen"] is True
        assert info["env"]["VLLM_HOST_IP"] == shard_rig.head_link and info["env"]["NCCL_SOCKET_IFNAME"] == a_if
        # Serving only once the first completion returned a token through the head (phase first_token).
        wait_until(lambda: "c3: serving: first token ' world' from org/tiny-model" in log.read_text(errors="replace"), 60,
                   "c3's first token", interval=0.25, proc=proc, log=log)

        # By its tag: the test hosts share this machine's pid namespace, where other shards may run.
        stop = shard_rig.c3("shard", "stop", "a-29555", "--nodes", "a,b", "--backend", "mp")
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert "a: stopped" in stop.stdout and "b: stopped" in stop.stdout and "c3: stopped shard a-29555 on a, b" in stop.stdout
        proc.wait(timeout=120)
        output = log.read_text(errors="replace")
        assert "every node's part is stopped" in output and SECRET not in output
        wait_until(lambda: shard_rig.leftovers() == {shard_rig.head.name: [], shard_rig.worker.name: []}, 30, "no process left in either host", interval=0.25)
        after = shard_rig.c3("shard", "status", "--nodes", "a,b", "--ray", shard_rig.ray)
        assert after.returncode == 0, after.stderr
        assert "a: not in a Ray cluster; 0 c3 shard process(es)" in after.stdout
        assert "b: not in a Ray cluster; 0 c3 shard process(es)" in after.stdout
    finally:
        stop_c3(proc)


def test_refuses_to_start_when_the_head_is_not_this_machine_but_dry_run_works(shard_rig, ray_installed):
    """Run from the machine's root namespace: neither host is local there."""
    import subprocess
    import sys

    shard_rig.register()
    argv = [sys.executable, "-m", "c3", "shard", "start", "--profile", "org/model", "--nodes", "a,b", "--gpus-per-node", "1",
            "--ray", shard_rig.ray, "--vllm", standin(shard_rig)]
    r = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=120, env=shard_rig.env())
    err = refused(r)
    assert "runs on the head node, and a is not this machine" in err
    dry = subprocess.run(argv + ["--dry-run"], check=False, capture_output=True, text=True, timeout=120, env=shard_rig.env())
    assert dry.returncode == 0, dry.stderr
    assert "[a] head (rank 0), ssh root@" in dry.stdout and "route only: the head is not this machine" in dry.stdout
    assert_nothing_running(shard_rig)


def test_unreachable_node_is_one_line_exit_3(shard_rig):
    from backend.nodes.registry import add_node

    add_node("a", f"http://{shard_rig.head.address}:{API_PORT}", shard_rig.head.ssh_target, ssh_key=str(shard_rig.rig.client_key))
    # h2's address on a port where nothing listens: connection refused, nothing leaves the test hosts.
    add_node("b", f"http://{shard_rig.worker.address}:{API_PORT}", f"root@{shard_rig.worker.address}:2", ssh_key=str(shard_rig.rig.client_key))
    r = shard_rig.c3("shard", "status", "--nodes", "a,b")
    # What can be shown is shown; the unreachable node gets its own line, and the exit code says so.
    assert r.returncode == 3, r.stdout + r.stderr
    assert "a: not in a Ray cluster; 0 c3 shard process(es)" in r.stdout
    assert "b: unreachable: node `b`: unreachable" in r.stdout and "Traceback" not in r.stderr
    assert r.stderr.startswith("c3: error: 1 of 2 node(s) unreachable: b")
    stop = shard_rig.c3("shard", "stop", "a-8000", "--nodes", "a,b", "--backend", "mp")
    assert stop.returncode == 3 and "a: stopped 0 process(es)" in stop.stdout and "b: node `b`: unreachable" in stop.stdout
    # A dry run needs no node: it prints the plan, with what only b can tell as placeholders.
    dry = shard_rig.c3("shard", "start", "--profile", "org/m", "--nodes", "a,b", "--gpus-per-node", "1", "--dry-run")
    assert dry.returncode == 0 and "b could not be reached (b: unreachable" in dry.stdout, dry.stdout + dry.stderr
    assert "<address of b: ip route get HEAD on b>" in dry.stdout
    start = shard_rig.c3("shard", "start", "--profile", "org/m", "--nodes", "a,b", "--gpus-per-node", "1")
    assert start.returncode == 3 and start.stderr.startswith("c3: error: phase reach failed on node b: unreachable")


def test_ray_port_inside_the_worker_range_is_a_usage_error(shard_rig):
    shard_rig.register()
    r = shard_rig.c3("shard", "start", "--profile", "org/model", "--nodes", "a,b", "--ray-port", "10500", "--dry-run")
    assert r.returncode == 2 and "worker port range" in r.stderr
