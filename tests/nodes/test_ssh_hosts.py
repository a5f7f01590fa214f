"""The SSH adapter against real OpenSSH servers on the test hosts."""

from __future__ import annotations

import stat
from pathlib import Path

from backend.remote.fleet import Fleet
from backend.remote.known_hosts import trust_host_key
from backend.remote.node import Node
from backend.remote.shell import NodeFailure
from backend.remote.ssh import fetch_host_key


def _nodes(rig) -> list[Node]:
    return [
        Node(name=h.name, host=f"http://{h.address}:8000", ssh=h.ssh_target, ssh_key=str(rig.client_key))
        for h in rig.hosts
    ]


async def test_fleet_on_two_hosts_with_strict_keys(ssh_hosts, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    nodes = _nodes(ssh_hosts)
    async with Fleet(nodes) as fleet:
        refused = await fleet.run_all("true")
    assert all(isinstance(r, NodeFailure) and r.kind == "hostkey-unknown" for r in refused.values())

    monkeypatch.setenv("C3_KNOWN_HOSTS", str(ssh_hosts.known_hosts))
    async with Fleet(nodes) as fleet:
        results = await fleet.run_all("ip -o -4 addr show")
        secret_path = f"{ssh_hosts.hosts[0].folder}/secret/app.env"
        await (await fleet.shell(nodes[0])).put_file("KEY=abc\n", secret_path)
    for host in ssh_hosts.hosts:
        assert host.address in results[host.name].stdout
    assert stat.S_IMODE(Path(secret_path).stat().st_mode) == 0o600


async def test_trust_shows_the_same_fingerprint_ssh_keygen_would(ssh_hosts, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    node = _nodes(ssh_hosts)[1]
    offered = await fetch_host_key(node)
    host_pub = (ssh_hosts.hosts[1].folder / "ssh_host_ed25519_key.pub").read_text().split()
    from backend.remote.known_hosts import fingerprint

    assert offered.fingerprint == fingerprint(host_pub[1])
    trust_host_key(offered)
    async with Fleet([node]) as fleet:
        result = (await fleet.run_all("echo ok"))[node.name]
    assert not isinstance(result, NodeFailure) and result.stdout.strip() == "ok"
