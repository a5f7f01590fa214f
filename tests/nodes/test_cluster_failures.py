"""Integration (issue 24): recipe launch failure modes produced for real on two netns test hosts with
their own dockerd, over real SSH, the stub engine as the recipe's engine.

Each test makes one real condition and checks the one error line `phase <name> failed on node
<node>: <reason>`, the exit code, and that no container of the launch is left on either host.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.nodes.cluster_helpers import PORT, containers, ssh

pytestmark = [pytest.mark.netns, pytest.mark.docker, pytest.mark.sshd]

TAG = "c3-failmodes-stub:same"


def failed_in(result, *, phase: str, node: str, code: int = 1) -> str:
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("c3: error: ")]
    assert len(lines) == 1 and lines[0].startswith(f"c3: error: phase {phase} failed on node {node}: "), result.stderr
    return lines[0]


def test_different_image_digests_on_two_nodes_fail_phase_image_before_anything_starts(cluster):
    """The same tag names different images on h1 and h2 (a rebuilt image shipped to one node only)."""
    rig, h1, h2 = cluster.rig, cluster.h1, cluster.h2
    assert ssh(rig, h1, f"docker tag {cluster.image_id} {TAG}").returncode == 0
    made = ssh(rig, h2, f"docker create --name c3-failmodes-variant {cluster.image_id} >/dev/null && "
                        f"docker commit --change 'LABEL c3.test=variant' c3-failmodes-variant {TAG} >/dev/null; "
                        "docker rm -f c3-failmodes-variant >/dev/null")
    assert made.returncode == 0, made.stderr
    try:
        ids = [ssh(rig, h, f"docker image inspect --format '{{{{.Id}}}}' {TAG}").stdout.strip() for h in (h1, h2)]
        assert ids[0] != ids[1] and all(i.startswith("sha256:") for i in ids)
        result = cluster.c3("recipes", "launch", "stub-pair", "--nodes", "h1,h2", "--set", f"image={TAG}", "--allow-unpinned",
                            "--timeout", "30")
        line = failed_in(result, phase="image", node="h2")
        assert f"image `{TAG}` is {ids[1][:19]} on h2 but {ids[0][:19]} on h1" in line
        assert "docker save" in result.stderr  # the hint: ship the same image
        assert containers(rig, h1) == {} and containers(rig, h2) == {}
    finally:
        for h in (h1, h2):
            ssh(rig, h, f"docker rmi {TAG} >/dev/null 2>&1; true")


def test_a_port_taken_on_the_head_fails_phase_load_with_the_engines_reason_and_rolls_back(cluster):
    """A real process holds rank 0's port inside h1's namespace: the engine cannot bind and exits."""
    rig, h1, h2 = cluster.rig, cluster.h1, cluster.h2
    code = ("import socket,sys,time\ns=socket.socket()\ns.bind((sys.argv[1], int(sys.argv[2])))\ns.listen()\n"
            "print('listening', flush=True)\ntime.sleep(600)\n")
    holder = subprocess.Popen(["nsenter", f"--net=/var/run/netns/{h1.netns}", sys.executable, "-c", code, "0.0.0.0", str(PORT)],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "listening"
        result = cluster.c3("recipes", "launch", "stub-pair", "--nodes", "h1,h2", "--timeout", "60")
    finally:
        holder.kill()
        holder.wait(timeout=30)
    line = failed_in(result, phase="load", node="h1")
    assert "rank 0 container exited" in line and "rolled back h1, h2" in line
    assert "c3: last lines from h1:" in result.stderr
    assert "address already in use" in result.stderr.lower()
    assert containers(rig, h1) == {} and containers(rig, h2) == {}
