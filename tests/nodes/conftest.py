"""Fixtures for the cluster tests: two test hosts with sshd + dockerd, the stub image shipped to each
the way a user would (`docker save | ssh host docker load`), and a registry/recipes per test."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest

from tests.nodes.cluster_helpers import PORT, C3Runner, ssh, write_recipes


@pytest.fixture(scope="session")
def shipped_hosts(docker_hosts, stub_image):
    """The two docker hosts with the stub image loaded over SSH; its image id (pinned by id in recipes)."""
    seconds = docker_hosts.ensure_image(stub_image)
    image_id = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", stub_image],
                              capture_output=True, text=True, check=True).stdout.strip()
    for host in docker_hosts.hosts:
        assert ssh(docker_hosts, host, f"docker image inspect {image_id} >/dev/null").returncode == 0
    # Like machines on one LAN: each host has a route to the other, so `ip route get HEAD` (how a
    # recipe learns each rank's address) answers on a worker as it does on a real node.
    for host in docker_hosts.hosts:
        for other in docker_hosts.hosts:
            if other is not host:
                subprocess.run(["ip", "-n", host.netns, "route", "replace", f"{other.address}/32", "via", host.gateway],
                               check=True, capture_output=True, timeout=30)
    return SimpleNamespace(rig=docker_hosts, image_id=image_id, ship_seconds=seconds)


@pytest.fixture
def cluster(shipped_hosts, monkeypatch, tmp_path):
    """Nodes h1, h2 registered and trusted in this test's C3_HOME, the test recipes written; every
    c3-* container removed from both hosts afterwards."""
    import os
    from pathlib import Path

    rig = shipped_hosts.rig
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    c3 = C3Runner()
    # Registered through the backend (the CLI path of `node add`/`node trust` has its own test).
    from backend.nodes.registry import add_node
    from backend.remote.known_hosts import managed_known_hosts

    for host in rig.hosts:
        # By DNS name, as people register their machines (the rig's names are in /etc/hosts).
        add_node(host.name, f"http://{host.dns_name}:{PORT}", host.ssh_target_by_name, str(rig.client_key))
    managed_known_hosts().parent.mkdir(parents=True, exist_ok=True)
    managed_known_hosts().write_text(rig.known_hosts.read_text())
    write_recipes(Path(os.environ["C3_HOME"]), shipped_hosts.image_id)
    yield SimpleNamespace(rig=rig, c3=c3, image_id=shipped_hosts.image_id, h1=rig.hosts[0], h2=rig.hosts[1])
    for host in rig.hosts:
        ssh(rig, host, "docker ps -aq --filter name=c3- | xargs -r docker rm -f >/dev/null 2>&1; true")
