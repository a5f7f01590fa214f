"""Issue 24: `shard start --backend rpc` (llama.cpp RPC): the plan binds each worker's rpc-server to its
cluster-link address and points the head's llama-server at them; 0.0.0.0 is refused, builds that differ
between nodes are refused before anything starts, and the no-authentication warning is in --help and
the dry run."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from backend.errors import Refused, UsageError
from backend.remote.node import Node
from backend.shard import rpc
from backend.shard.models import Interface, NodeFacts, Route
from backend.shard.ops import NodeStatus, rpc_parts
from backend.shard.plan import ShardOptions, assign, order_nodes
from backend.shard.render import describe, start_order

ROOT = Path(__file__).resolve().parents[2]
NODES = [Node(name=n, host=f"http://10.0.0.{i}:8000", ssh=f"u@10.0.0.{i}") for i, n in enumerate(("h", "w1", "w2"), start=1)]
VERSION = "version: 7000 (abc123) built with GNU 12.2.0 for Linux x86_64"


def _facts(**versions: str) -> dict[str, NodeFacts]:
    out = {}
    for i, node in enumerate(NODES, start=1):
        out[node.name] = NodeFacts(
            node=node.name, interfaces=[Interface(name="qsfp0", address=f"192.168.100.{i}", prefix=24)],
            llama_server_path="/opt/llama/llama-server", rpc_server_path="/opt/llama/ggml-rpc-server",
            llama_version=versions.get(node.name, VERSION))
    return out


def _options(**extra: object) -> ShardOptions:
    values: dict[str, object] = {"rpc_port": 50052, "api_port": 8080, **extra}
    return ShardOptions(backend="rpc", model="/models/big.gguf", args=["-c", "4096"], **values)  # type: ignore[arg-type]


def _plan(**extra: object):
    routes = {f"w{i}": Route(node=f"w{i}", interface="qsfp0", source=f"192.168.100.{i + 1}") for i in (1, 2)}
    return _build(routes, _options(**extra))


def _build(routes: dict[str, Route], options: ShardOptions):
    ordered = order_nodes(NODES, options)
    return rpc.assemble(ordered, assign(ordered, _facts(), routes, "192.168.100.1"), options, secret_names=[],
                        local={n.name: False for n in ordered})


def test_plan_binds_each_rpc_server_on_its_link_address_and_the_head_dials_them():
    plan = _plan()
    head, w1, w2 = plan.parts
    assert w1.steps[0].argv == ["ggml-rpc-server", "-H", "192.168.100.2", "-p", "50052"]
    assert w2.steps[0].argv == ["ggml-rpc-server", "-H", "192.168.100.3", "-p", "50053"]
    assert head.steps[0].argv == ["llama-server", "-m", "/models/big.gguf", "--rpc", "192.168.100.2:50052,192.168.100.3:50053",
                                  "--host", "192.168.100.1", "--port", "8080", "-c", "4096"]
    # The workers listen before the head loads the model.
    assert start_order(plan) == [("w1", 0), ("w2", 0), ("h", 0)]
    assert plan.tag == "h-50052"


def test_dry_run_text_warns_that_rpc_has_no_authentication():
    text = "\n".join(describe(_plan()))
    assert "no authentication" in text and "never 0.0.0.0" in text
    assert "3. llama-server -m /models/big.gguf --rpc 192.168.100.2:50052,192.168.100.3:50053" in text


@pytest.mark.parametrize("address", ["0.0.0.0", "::"])
def test_unspecified_bind_address_is_refused(address):
    with pytest.raises(UsageError, match="every interface"):
        rpc.check_options(_options(head_address=address), 3)
    with pytest.raises(UsageError, match="every interface"):
        rpc.check_bind(address, "the RPC bind address of w1")


def test_a_worker_whose_link_address_is_0000_is_refused():
    routes = {"w1": Route(node="w1", interface="qsfp0", source="0.0.0.0"),
              "w2": Route(node="w2", interface="qsfp0", source="192.168.100.3")}
    with pytest.raises(UsageError, match="w1 0.0.0.0 would expose"):
        _build(routes, _options())


def test_rpc_ports_must_fit_and_miss_the_api_port():
    with pytest.raises(UsageError, match="no port for worker 2"):
        rpc.check_options(_options(rpc_port=65535), 3)
    with pytest.raises(UsageError, match="--port 50053 is one of"):
        rpc.check_options(ShardOptions(backend="rpc", model="m.gguf", api_port=50053), 3)


def test_mismatched_llama_builds_are_refused_with_each_nodes_version():
    facts = _facts(w2="version: 6999 (def456) built with GNU 12.2.0 for Linux x86_64")
    with pytest.raises(Refused, match="builds differ between nodes") as refused:
        rpc.check_builds(NODES, facts, _options())
    assert "w2: version: 6999 (def456)" in refused.value.message and "h: version: 7000" in refused.value.message
    assert rpc.check_builds(NODES, _facts(), _options()) == VERSION


def test_missing_binaries_and_unreadable_builds_are_refused():
    facts = _facts()
    facts["w1"] = facts["w1"].model_copy(update={"rpc_server_path": None})
    with pytest.raises(Refused, match="`ggml-rpc-server` not found on w1"):
        rpc.check_builds(NODES, facts, _options())
    facts = _facts()
    facts["w2"] = facts["w2"].model_copy(update={"llama_version": None})
    with pytest.raises(Refused, match="could not read the llama.cpp build on w2"):
        rpc.check_builds(NODES, facts, _options())


def test_probe_output_is_read():
    out = ("rpc_server_path=/opt/l/ggml-rpc-server\nllama_server_path=\nllama_version=version: 1 (x) built with cc \n"
           "addr=2: qsfp0    inet 192.168.100.2/24 brd 192.168.100.255 scope global qsfp0\nprobe=done\n")
    facts = rpc.parse_rpc_facts("w1", out, local=False)
    assert facts.rpc_server_path == "/opt/l/ggml-rpc-server" and facts.llama_server_path is None
    assert facts.llama_version == "version: 1 (x) built with cc" and facts.interfaces[0].address == "192.168.100.2"


def test_real_probe_reads_two_local_nodes_alike(tmp_path):
    """The probe script itself, run here: two builds that print different versions are refused."""
    from backend.remote.local import LocalShell

    for name, version in (("a", "version: 1 (aaa)"), ("b", "version: 2 (bbb)")):
        folder = tmp_path / name
        folder.mkdir()
        for binary in ("llama-server", "ggml-rpc-server"):
            (folder / binary).write_text(f"#!/bin/sh\necho '{version}' >&2\n")
            (folder / binary).chmod(0o755)
    nodes = [Node(name="a", host="http://127.0.0.1:1", ssh="u@127.0.0.1", local=True),
             Node(name="b", host="http://127.0.0.1:2", ssh="u@127.0.0.1", local=True)]

    async def probe(node: Node, folder: Path) -> NodeFacts:
        script = rpc.facts_script(llama_server=str(folder / "llama-server"), rpc_server=str(folder / "ggml-rpc-server"))
        result = await LocalShell(node).run(script, timeout=30)
        return rpc.parse_rpc_facts(node.name, result.stdout, local=True)

    facts = {"a": asyncio.run(probe(nodes[0], tmp_path / "a")), "b": asyncio.run(probe(nodes[1], tmp_path / "b"))}
    assert facts["a"].llama_version == "version: 1 (aaa)"
    with pytest.raises(Refused, match=r"a: version: 1 \(aaa\); b: version: 2 \(bbb\)"):
        rpc.check_builds(nodes, facts, _options())


def test_status_names_each_part_and_its_state():
    nodes = [NodeStatus(node="h", reachable=True, processes=[{"pid": "10", "command": "/x/llama-server -m m.gguf --rpc 1.2.3.4:50052"}]),
             NodeStatus(node="w1", reachable=True, processes=[{"pid": "11", "command": "/x/ggml-rpc-server -H 1.2.3.4 -p 50053"}]),
             NodeStatus(node="w2", reachable=True, processes=[{"pid": "12", "command": "/x/ggml-rpc-server -H 1.2.3.5 -p 50053"}])]
    parts = rpc_parts(nodes, 50052)
    assert [(p.node, p.part, p.state, p.pid) for p in parts] == [
        ("h", "llama-server", "running", "10"), ("w1", "rpc-server port 50052", "not running", None),
        ("w2", "rpc-server port 50053", "running", "12")]


def test_cli_help_and_dry_run_say_rpc_has_no_authentication():
    from backend.nodes.registry import add_node

    helped = subprocess.run([sys.executable, "-m", "c3", "shard", "start", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "no authentication" in " ".join(helped.stdout.split()), helped.stdout
    add_node("here", "http://127.0.0.1:18000", "me@127.0.0.1", local=True)
    add_node("here2", "http://127.0.0.1:18001", "me@127.0.0.1", local=True)
    r = subprocess.run([sys.executable, "-m", "c3", "shard", "start", "--backend", "rpc", "--profile", "/models/x.gguf", "--nodes", "here,here2",
                        "--llama-server", "/nonexistent/llama-server", "--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no authentication" in r.stdout and "ggml-rpc-server -H" in r.stdout and "Traceback" not in r.stderr
    bad = subprocess.run([sys.executable, "-m", "c3", "shard", "start", "--backend", "rpc", "--profile", "/models/x.gguf", "--nodes", "here,here2",
                          "--head-address", "0.0.0.0"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("c3: error: --head-address 0.0.0.0 would expose"), bad.stderr
    assert "Traceback" not in bad.stderr
