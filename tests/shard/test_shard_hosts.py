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

from tests.shard.conftest import API_PORT, RAY_PORT, RAY_VERSION, wait_for, write_script

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
    assert f"[b] worker (rank 1), ssh root@{shard_rig.worker.address}:22, address {shard_rig.worker_link} on {b_if}" in out
    assert f"VLLM_HOST_IP={shard_rig.worker_link} NCCL_SOCKET_IFNAME={b_if} GLOO_SOCKET_IFNAME={b_if}" in out
    assert f"--address={shard_rig.head_link}:{RAY_PORT}" in out
    assert "--tensor-parallel-size 1 --pipeline-parallel-size 2 --distributed-executor-backend ray" in out
    assert f"Python" in out and "reachable from b" in out
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
    assert f"head address {shard_rig.head.address}:6379 is not reachable from b" in err
    assert "unreachable" in err.lower()


def test_refuses_ray_or_python_versions_that_differ(shard_rig, ray_installed):
    shard_rig.register()
    marker = f" {shard_rig.worker_link}/"
    old_ray = write_script(shard_rig.folder / "ray-old-on-b", "#!/bin/sh\n"
                           f"if ip -o -4 addr show | grep -q '{marker}'; then echo 'ray, version 2.49.1'; exit 0; fi\n"
                           f"exec {shard_rig.ray} \"$@\"\n")
    common = ("--profile", "org/model", "--nodes", "a,b", "--gpus-per-node", "1", "--vllm", standin(shard_rig))
    err = refused(shard_rig.c3("shard", "start", *common, "--ray", old_ray))
    assert f"Ray versions differ between nodes (a: {RAY_VERSION}, b: 2.49.1)" in err
    old_py = write_script(shard_rig.folder / "python-old-on-b", "#!/bin/sh\n"
                          f"if ip -o -4 addr show | grep -q '{marker}'; then echo '3.10.4'; exit 0; fi\n"
                          f"exec {shard_rig.python} \"$@\"\n")
    err = refused(shard_rig.c3("shard", "start", *common, "--ray", shard_rig.ray, "--python", old_py))
    assert "Python versions differ between nodes (a: 3." in err and "b: 3.10.4)" in err
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
