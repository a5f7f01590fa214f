"""`c3 node add|ls|rm|trust` as a user runs them, against real sshd on the test hosts."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from backend.remote.known_hosts import fingerprint
from tests.nodes.cluster_helpers import C3Runner


def test_add_ls_trust_rm(ssh_hosts, monkeypatch, tmp_path):
    import os

    monkeypatch.setenv("HOME", str(tmp_path))
    c3 = C3Runner()
    h1 = ssh_hosts.hosts[0]
    out = c3.ok("node", "add", "h1", "--host", f"http://{h1.address}:8000", "--ssh", h1.ssh_target, "--ssh-key", str(ssh_hosts.client_key))
    assert "c3 node trust h1" in out
    c3.ok("node", "add", "here", "--host", "http://127.0.0.1:8000", "--ssh", "root@localhost")
    listed = json.loads(c3.ok("node", "ls", "--json"))["nodes"]
    assert [(n["name"], n["host"], n["ssh"], n["local"]) for n in listed] == [
        ("h1", f"http://{h1.address}:8000", h1.ssh_target, False), ("here", "http://127.0.0.1:8000", "root@localhost", True)]
    registry = Path(os.environ["C3_HOME"]) / "nodes.json"
    assert stat.S_IMODE(registry.stat().st_mode) == 0o600

    # Not a TTY and no --fingerprint/--yes: refuse; a wrong fingerprint: refuse; the right one: trust.
    refused = c3("node", "trust", "h1")
    assert refused.returncode == 1 and "without confirmation" in refused.stderr
    wrong = c3("node", "trust", "h1", "--fingerprint", "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
    assert wrong.returncode == 1 and "nothing was trusted" in wrong.stderr
    pub = (h1.folder / "ssh_host_ed25519_key.pub").read_text().split()[1]
    out = c3.ok("node", "trust", "h1", "--fingerprint", fingerprint(pub))
    assert fingerprint(pub) in out and "trusted" in out
    assert "already trusted" in c3.ok("node", "trust", "h1")
    assert "this machine" in c3.ok("node", "trust", "here")

    duplicate = c3("node", "add", "h1", "--host", "http://10.213.0.9:8000", "--ssh", "root@10.213.0.9")
    assert duplicate.returncode == 1 and duplicate.stderr.startswith("c3: error: node `h1` is already registered")
    bad = c3("node", "add", "x", "--host", "ftp://nope", "--ssh", "root@h")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    c3.ok("node", "rm", "here")
    assert [n["name"] for n in json.loads(c3.ok("node", "ls", "--json"))["nodes"]] == ["h1"]
    missing = c3("recipes", "launch", "nope", "--nodes", "h1")
    assert missing.returncode == 1 and "no recipe `nope`" in missing.stderr


def _reachable_and_down(ssh_hosts, monkeypatch, tmp_path) -> C3Runner:
    """Two nodes: `h1` answers SSH, `down` points at a port where nothing listens."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("C3_KNOWN_HOSTS", str(ssh_hosts.known_hosts))
    c3 = C3Runner()
    h1, h2 = ssh_hosts.hosts
    c3.ok("node", "add", "h1", "--host", f"http://{h1.address}:8000", "--ssh", h1.ssh_target, "--ssh-key", str(ssh_hosts.client_key))
    c3.ok("node", "add", "down", "--host", f"http://{h2.address}:8000", "--ssh", f"root@{h2.address}:2222",
          "--ssh-key", str(ssh_hosts.client_key))
    return c3


def test_node_status_reports_each_node(ssh_hosts, monkeypatch, tmp_path):
    c3 = _reachable_and_down(ssh_hosts, monkeypatch, tmp_path)
    probed = c3("node", "status", "--json")
    # One node unreachable is the environment refusing: exit 3 (DESIGN.md), with every row still printed.
    assert probed.returncode == 3, (probed.returncode, probed.stderr)
    rows = {r["name"]: r for r in json.loads(probed.stdout)["nodes"]}
    assert rows["h1"]["reachable"] is True and rows["h1"]["gpu_error"] == "nvidia-smi not found"
    assert rows["h1"]["endpoint_ok"] is False
    assert rows["down"]["reachable"] is False and "unreachable" in rows["down"]["ssh_error"]


def test_parse_gpus_handles_unified_memory():
    from backend.nodes.health import parse_gpus

    gpus = parse_gpus("0, NVIDIA GB10, [N/A], [N/A]\n1, NVIDIA GeForce RTX 3090, 24576, 512\n")
    assert [(g.index, g.name, g.total_mib, g.used_mib) for g in gpus] == [
        (0, "NVIDIA GB10", None, None), (1, "NVIDIA GeForce RTX 3090", 24576, 512)]


def test_add_node_refuses_overlong_names_and_reports_an_unwritable_registry(tmp_path):
    from backend.errors import EnvironmentProblem, UsageError
    from backend.nodes.registry import add_node

    try:
        add_node("n" * 64, "http://127.0.0.1:9", "u@127.0.0.1:9", path=tmp_path / "nodes.json")
    except UsageError as error:
        assert "at most 63 characters" in error.message
    else:
        raise AssertionError("a 64-character node name was accepted")
    blocker = tmp_path / "file"
    blocker.write_text("")
    try:
        add_node("n1", "http://127.0.0.1:9", "u@127.0.0.1:9", path=blocker / "nodes.json")
    except EnvironmentProblem as error:
        assert str(blocker / "nodes.json") in error.message
    else:
        raise AssertionError("a registry under a plain file was written")


def test_node_status_text_of_an_unreachable_node_exits_3_with_one_line(ssh_hosts, monkeypatch, tmp_path):
    """Issue 25: `c3 node status NAME` of an unreachable node exited 0; the contract says 3."""
    c3 = _reachable_and_down(ssh_hosts, monkeypatch, tmp_path)
    down = c3("node", "status", "down")
    assert down.returncode == 3, (down.returncode, down.stdout, down.stderr)
    assert down.stdout.startswith("down  ssh: ") and "Traceback" not in down.stderr
    assert down.stderr.splitlines()[0] == "c3: error: 1 of 1 node(s) unreachable: down"
    assert c3("node", "status", "h1").returncode == 0
