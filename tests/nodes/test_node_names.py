"""Nodes registered the way people register them: DNS names, IPv6 names, `~/.ssh/config` aliases.

Against the rig's real sshd, with the rig's names in /etc/hosts (scripts/rig/names.py) and a
temporary HOME (never the real ~/.ssh).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from backend.remote.known_hosts import fingerprint
from tests.nodes.cluster_helpers import C3Runner


def _host_pub(host) -> str:
    return (host.folder / "ssh_host_ed25519_key.pub").read_text().split()[1]


def test_node_by_dns_name_trust_records_name_and_address_then_status(ssh_hosts, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    c3 = C3Runner()
    h1 = ssh_hosts.hosts[0]
    out = c3.ok("node", "add", "spark1", "--host", f"http://{h1.dns_name}:8001", "--ssh", h1.ssh_target_by_name,
                "--ssh-key", str(ssh_hosts.client_key))
    assert "c3 node trust spark1" in out
    # Unknown yet: a one-line refusal naming the node, never a traceback.
    unknown = c3("node", "status", "--json")
    assert unknown.returncode == 3 and "Traceback" not in unknown.stderr, unknown.stderr
    row = json.loads(unknown.stdout)["nodes"][0]
    assert row["reachable"] is False and "not trusted" in row["ssh_error"]

    trusted = c3("node", "trust", "spark1", "--fingerprint", fingerprint(_host_pub(h1)))
    assert trusted.returncode == 0 and "Traceback" not in trusted.stderr, trusted.stderr
    managed = (Path(os.environ["C3_HOME"]) / "known_hosts").read_text()
    patterns = managed.split()[0].split(",")
    assert h1.dns_name in patterns and h1.address in patterns and h1.address6 in patterns
    assert "already trusted" in c3.ok("node", "trust", "spark1", "--yes")

    rows = json.loads(c3.ok("node", "status", "--json"))["nodes"]
    assert rows[0]["reachable"] is True and rows[0]["gpu_error"] == "nvidia-smi not found"


def test_node_over_ipv6_name_and_literal(ssh_hosts, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    c3 = C3Runner()
    h2 = ssh_hosts.hosts[1]
    c3.ok("node", "add", "v6name", "--host", f"http://{h2.dns_name6}:8001", "--ssh", f"root@{h2.dns_name6}",
          "--ssh-key", str(ssh_hosts.client_key))
    c3.ok("node", "add", "v6lit", "--host", f"http://[{h2.address6}]:8001", "--ssh", f"root@[{h2.address6}]:22",
          "--ssh-key", str(ssh_hosts.client_key))
    c3.ok("node", "trust", "v6name", "--fingerprint", fingerprint(_host_pub(h2)))
    # Trusting by the v6 name recorded the address too: the literal is already trusted.
    assert "already trusted" in c3.ok("node", "trust", "v6lit", "--yes")
    rows = {r["name"]: r for r in json.loads(c3.ok("node", "status", "--json"))["nodes"]}
    assert rows["v6name"]["reachable"] is True and rows["v6lit"]["reachable"] is True, rows


def test_ssh_config_alias_is_honoured(ssh_hosts, monkeypatch, tmp_path):
    """`--ssh coder@box` where `box` exists only in ~/.ssh/config (HostName, Port, IdentityFile)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("C3_KNOWN_HOSTS", str(ssh_hosts.known_hosts))
    h1 = ssh_hosts.hosts[0]
    (tmp_path / ".ssh").mkdir(mode=0o700)
    (tmp_path / ".ssh" / "config").write_text(
        f"Host box\n  HostName {h1.address}\n  Port {h1.ssh_port}\n  User root\n  IdentityFile {ssh_hosts.client_key}\n")
    c3 = C3Runner()
    c3.ok("node", "add", "box", "--host", f"http://{h1.address}:8001", "--ssh", "root@box")
    rows = json.loads(c3.ok("node", "status", "--json"))["nodes"]
    assert rows[0]["reachable"] is True, rows


def test_locality_follows_the_ssh_target(monkeypatch, tmp_path):
    """An endpoint on 127.0.0.1 (a tunnel) with a remote SSH target is remote; `--local` overrides."""
    monkeypatch.setenv("HOME", str(tmp_path))
    c3 = C3Runner()
    out = c3.ok("node", "add", "tunnelled", "--host", "http://127.0.0.1:18001", "--ssh", "coder@spark9.invalid")
    assert "this machine" not in out
    c3.ok("node", "add", "forced", "--host", "http://10.9.9.9:8000", "--ssh", "coder@spark8.invalid", "--local")
    rows = {n["name"]: n["local"] for n in json.loads(c3.ok("node", "ls", "--json"))["nodes"]}
    assert rows == {"tunnelled": False, "forced": True}


async def test_one_node_that_raises_the_unexpected_is_its_own_row(monkeypatch):
    """A surprise in one node's probe (the old ValueError from a name) must not empty the table."""
    from backend.nodes.health import probe_nodes
    from backend.remote import ssh
    from backend.remote.node import Node

    async def connect(node, options=None):
        raise ValueError(f"{node.ssh_host!r} does not appear to be an IPv4 or IPv6 address")

    monkeypatch.setattr(ssh.SshShell, "connect", staticmethod(connect))
    nodes = [Node(name="here", host="http://127.0.0.1:9", ssh="me@localhost"),
             Node(name="spark1", host="http://127.0.0.1:9", ssh="coder@spark1")]
    rows = {r.name: r for r in await probe_nodes(nodes)}
    assert rows["here"].reachable is True
    assert rows["spark1"].reachable is False and "does not appear" in rows["spark1"].ssh_error


def test_cockpit_nodes_rows_by_name_with_one_bad_node(ssh_hosts, monkeypatch, tmp_path):
    """The cockpit's Nodes mode (the real facade's node_rows) over nodes registered by DNS name, with one
    name that does not resolve: every node keeps its own row."""
    from types import SimpleNamespace

    from backend.nodes.registry import add_node
    from c3.services_cluster import node_rows

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("C3_KNOWN_HOSTS", str(ssh_hosts.known_hosts))
    h1, h2 = ssh_hosts.hosts
    add_node("spark1", f"http://{h1.dns_name}:8001", h1.ssh_target_by_name, str(ssh_hosts.client_key))
    add_node("spark2", f"http://{h2.dns_name6}:8001", f"root@{h2.dns_name6}", str(ssh_hosts.client_key))
    add_node("ghost", "http://ghost.invalid:8001", "coder@ghost.invalid")
    rows = {r.name: r for r in node_rows(SimpleNamespace(gpu_snapshots=list))}
    assert set(rows) == {"spark1", "spark2", "ghost"}
    assert rows["spark1"].reachable and rows["spark2"].reachable
    assert rows["ghost"].reachable is False and "unreachable" in rows["ghost"].detail


def test_dry_runs_need_no_node(monkeypatch, tmp_path):
    """The seed's example typed literally, with nodes that cannot be reached: recipe and shard dry runs
    print every command, with what only the nodes can tell as placeholders, and change nothing."""
    monkeypatch.setenv("HOME", str(tmp_path))
    c3 = C3Runner()
    c3.ok("node", "add", "spark1", "--host", "http://spark1.invalid:8001", "--ssh", "coder@spark1.invalid")
    c3.ok("node", "add", "spark2", "--host", "http://spark2.invalid:8001", "--ssh", "coder@spark2.invalid")
    out = c3.ok("recipes", "launch", "spark2-vllm-qwen3-235b-a22b-gptq-int4", "--nodes", "spark1,spark2", "--dry-run")
    assert "--master-addr '<head address: from the interfaces of spark1>'" in out
    assert "VLLM_HOST_IP=<address of spark2: ip route get HEAD on spark2>" in out
    assert "spark2.invalid" not in out.split("rank 1, ssh coder@spark2.invalid):", 1)[1].split("$ docker run", 1)[1]

    shard = c3("shard", "start", "--profile", "org/model --max-model-len 8192", "--nodes", "spark1,spark2", "--tp", "1",
               "--pp", "2", "--dry-run", timeout=120)
    assert shard.returncode == 0 and "Traceback" not in shard.stderr, shard.stderr
    assert "spark1, spark2 could not be reached" in shard.stdout
    assert "<interface of spark2 toward the head>" in shard.stdout and "ray start" in shard.stdout
    assert not (Path(os.environ["C3_HOME"]) / "profiles").exists()


SERVER = """
import http.server, json, socket, sys
name = sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def _answer(self):
        body = json.dumps({"object": "list", "data": [{"id": "m"}], "served_by": name}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    do_GET = do_POST = _answer
    def log_message(self, *a): pass
class S(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
S((sys.argv[1], 8001), H).serve_forever()
"""


def test_pool_over_names(ssh_hosts, monkeypatch, tmp_path):
    """`c3 pool serve` in front of two test hosts registered by DNS name (one by its IPv6-only name)."""
    import subprocess
    import sys

    import httpx

    from backend.nodes.registry import add_node
    from tests.plugins.rig import free_port
    from tests.pool.conftest import c3_argv, wait_until

    monkeypatch.setenv("HOME", str(tmp_path))
    h1, h2 = ssh_hosts.hosts
    servers = [subprocess.Popen(h.nsenter([sys.executable, "-c", SERVER, bind, h.name]), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL) for h, bind in ((h1, h1.address), (h2, h2.address6))]
    add_node("spark1", f"http://{h1.dns_name}:8001", h1.ssh_target_by_name)
    add_node("spark2", f"http://{h2.dns_name6}:8001", f"root@{h2.dns_name6}")
    port = free_port()
    pool = subprocess.Popen([*c3_argv(), "pool", "serve", "--nodes", "spark1,spark2", "--bind", f"127.0.0.1:{port}",
                             "--sticky", "header:X-Session", "--probe-interval", "0.25", "--probe-timeout", "1"],
                            stdout=open(tmp_path / "pool.log", "wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        def healthy():
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/c3/status", timeout=1).json()
            except (httpx.HTTPError, ValueError):
                return False
            return all(b["healthy"] for b in status["backends"]) and len(status["backends"]) == 2
        wait_until(healthy, timeout=30, what="both named backends healthy")
        seen = {httpx.get(f"http://127.0.0.1:{port}/v1/models", headers={"X-Session": f"s{i}"}, timeout=5).json()["served_by"]
                for i in range(24)}
        assert seen == {"h1", "h2"}
    finally:
        for proc in (pool, *servers):
            proc.terminate()
            proc.wait(timeout=20)
