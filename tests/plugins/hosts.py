"""Test hosts in network namespaces, each with its own sshd (and optionally its own dockerd).

Fixtures (built on scripts/rig/hosts.py):
- `host_rig_factory(count=2, docker=False) -> HostRig`: session-scoped and cached per (count, docker),
  so every module asking for the same shape shares one set of hosts; all torn down at session end.
- `ssh_hosts`: two hosts with sshd only (10.213.N.2, root, the rig's key and known_hosts).
- `docker_hosts`: two hosts with sshd and each its own dockerd (`SetEnv DOCKER_HOST` in its sshd).

Each calls `require_service("netns", …)` so a machine without root/ip/sshd/dockerd skips, and CI
(`--require-services`) fails instead. Set-up times are printed in the terminal summary (by the controller under xdist).
"""

from __future__ import annotations

import pytest

from scripts.rig.hosts import HostRig, HostRigError, missing_requirements
from tests.plugins.workers import summary_line


@pytest.fixture(scope="session")
def host_rig_factory(require_service, pytestconfig):
    """Build (or reuse) a rig of `count` hosts; `docker=True` gives each host its own dockerd."""
    cache: dict[tuple[int, bool], HostRig] = {}

    def make(count: int = 2, docker: bool = False) -> HostRig:
        why = missing_requirements(docker)
        require_service("netns", why is None, why or "")
        key = (count, docker)
        if key not in cache:
            try:
                rig = HostRig.create(count=count, docker=docker)
            except HostRigError as exc:
                require_service("netns", False, f"test hosts could not be built: {exc}")
                raise
            cache[key] = rig
            label = f"{count} host(s){' + dockerd' if docker else ''}"
            summary_line(pytestconfig, f"test hosts: {label} set up in {rig.setup_seconds:.2f}s ({rig.folder})")
        return cache[key]

    yield make
    for rig in cache.values():
        rig.teardown()


@pytest.fixture(scope="session")
def ssh_hosts(host_rig_factory) -> HostRig:
    """Two hosts with their own sshd (no dockerd)."""
    return host_rig_factory(2, docker=False)


@pytest.fixture(scope="session")
def docker_hosts(host_rig_factory) -> HostRig:
    """Two hosts, each with its own sshd and dockerd."""
    return host_rig_factory(2, docker=True)

