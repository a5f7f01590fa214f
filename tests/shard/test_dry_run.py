"""Issue 24: `shard start --dry-run` never needs a reachable node and treats every node alike: a node
that answers but fails a check (no vllm) gets the same one-line note and placeholder plan (exit 0) as a
node that cannot be reached; before, the first refused (exit 1) while the second printed a plan."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from backend.remote.node import Node
from backend.remote.shell import NodeFailure
from backend.shard.plan import ShardOptions

ROOT = Path(__file__).resolve().parents[2]
OPTS = {"backend": "mp", "model": "org/m", "vllm": "/nonexistent/vllm", "gpus_per_node": 1, "tp": 1, "pp": 2}
NODES = [Node(name="here", host="http://127.0.0.1:18000", ssh="me@127.0.0.1", local=True),
         Node(name="here2", host="http://127.0.0.1:18001", ssh="me@127.0.0.1", local=True)]


def _dry_run(monkeypatch, *, unreachable: str | None) -> list[str]:
    from backend.shard import ops

    if unreachable:
        real = ops.open_shells

        async def some_unreachable(nodes):
            shells, failures = await real([n for n in nodes if n.name != unreachable])
            return shells, {**failures, unreachable: NodeFailure(unreachable, "unreachable", "connection refused")}
        monkeypatch.setattr(ops, "open_shells", some_unreachable)
    lines: list[str] = []
    assert asyncio.run(ops.start(NODES, ShardOptions(**OPTS), echo=lines.append, dry_run=True)) == 0
    return lines


def test_a_failed_check_and_an_unreachable_node_give_the_same_dry_run(monkeypatch):
    failed = _dry_run(monkeypatch, unreachable=None)
    gone = _dry_run(monkeypatch, unreachable="here2")
    assert failed[0] == ("dry run without checks: a check failed (phase versions failed on node here: `/nonexistent/vllm` not found on here, here2);"
                         " a real start refuses until this is fixed")
    assert gone[0] == "dry run without checks: here2 could not be reached (here2: connection refused); a real start refuses until this is fixed"
    assert failed[1:] == gone[1:] and any("vllm serve" in line or "serve org/m" in line for line in failed)


def test_cli_dry_run_exits_0_when_a_reachable_node_lacks_vllm():
    from backend.nodes.registry import add_node

    add_node("here", "http://127.0.0.1:18000", "me@127.0.0.1", local=True)
    add_node("here2", "http://127.0.0.1:18001", "me@127.0.0.1", local=True)
    r = subprocess.run([sys.executable, "-m", "c3", "shard", "start", "--profile", "org/m", "--nodes", "here,here2", "--gpus-per-node", "1",
                        "--backend", "mp", "--vllm", "/nonexistent/vllm", "--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "dry run without checks: a check failed" in r.stdout and "Traceback" not in r.stderr
    real = subprocess.run([sys.executable, "-m", "c3", "shard", "start", "--profile", "org/m", "--nodes", "here,here2", "--gpus-per-node", "1",
                           "--backend", "mp", "--vllm", "/nonexistent/vllm"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert real.returncode == 1 and real.stderr.startswith("c3: error: phase versions failed on node here: `/nonexistent/vllm` not found")
