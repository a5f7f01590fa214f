"""`c3 shard stop` stops one shard, by its tag (issue 24): two shards on the same nodes, and test hosts in
network namespaces that share one pid namespace, each see the other's processes; a stop by `--nodes` alone
reached another test's shard. Two foreground runners here (tests/shard/_local_runner.py: both nodes this
machine, the rank stand-in a `sleep`), with different tags on the same two nodes.

No test here runs `--all`: other sessions on this machine run shards of their own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shard.test_first_token import free_pair
from tests.shard.test_runner_local import FAKE, _tag_of, alive, pids_started

ROOT = Path(__file__).resolve().parents[2]


def _start(tmp_path: Path, name: str) -> tuple[subprocess.Popen, Path]:
    folder = tmp_path / name
    folder.mkdir()
    fake = folder / "vllm"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    log = folder / "runner.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tests.shard._local_runner", str(fake), str(free_pair())], cwd=ROOT,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, log


def _c3(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "c3", *args], cwd=ROOT, capture_output=True, text=True, timeout=120, env=os.environ)


@pytest.fixture
def two_shards(tmp_path, monkeypatch):
    """Shards `a-P` and `a-Q` on nodes a and b (both this machine, registered), each with two ranks running."""
    from backend.nodes.registry import add_node

    monkeypatch.setenv("HOME", str(tmp_path))  # the stop markers go under ~/.c3/shard
    add_node("a", "http://127.0.0.1:8000", "u@127.0.0.1")
    add_node("b", "http://127.0.0.2:8000", "u@127.0.0.2")
    shards = [_start(tmp_path, "one"), _start(tmp_path, "two")]
    try:
        pids = []
        for proc, log in shards:
            started = pids_started(log, 2, proc)
            assert len(started) == 2, log.read_text()
            pids.append(started)
        yield shards, pids
    finally:
        for proc, _ in shards:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for started in pids:
            for pid in started:
                if alive(pid):
                    os.kill(pid, 9)


def test_stopping_one_shard_by_its_tag_leaves_the_other_running(two_shards):
    (one, one_log), (two, _) = two_shards[0]
    one_pids, two_pids = two_shards[1]
    one_tag, two_tag = _tag_of(one_pids[0]), _tag_of(two_pids[0])
    assert one_tag != two_tag
    stopped = _c3("shard", "stop", one_tag, "--nodes", "a,b", "--backend", "mp")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    # Both nodes are this machine and stop at once: each one's scan finds the shard's two ranks, never the other's.
    assert "a: stopped 2 process(es)" in stopped.stdout and "b: stopped 2 process(es)" in stopped.stdout
    assert f"c3: stopped shard {one_tag} on a, b" in stopped.stdout
    assert one.wait(timeout=60) == 0 and "c3: stopped by request" in one_log.read_text()
    assert not any(alive(p) for p in one_pids)
    assert all(alive(p) for p in two_pids) and two.poll() is None
    # Its status lists the other shard's processes only, each with its tag (exit 1: a `sleep` is no `vllm serve` rank).
    status = _c3("shard", "status", two_tag, "--nodes", "a,b", "--json")
    assert status.returncode == 1, status.stdout + status.stderr
    listed = [p for node in json.loads(status.stdout)["nodes"] for p in node["processes"]]
    assert {int(p["pid"]) for p in listed} == set(two_pids) and {p["shard"] for p in listed} == {two_tag}


def test_a_tag_alone_reads_the_shards_nodes_from_its_record(two_shards):
    (one, _), (two, _) = two_shards[0]
    one_pids, two_pids = two_shards[1]
    two_tag = _tag_of(two_pids[0])
    one_tag = _tag_of(one_pids[0])
    stopped = _c3("shard", "stop", two_tag)  # no --nodes: a and b, and the backend (mp: no `ray stop`), from its record
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert f"c3: stopped shard {two_tag} on a, b" in stopped.stdout and "ray stop" not in stopped.stdout
    assert two.wait(timeout=60) == 0
    assert not any(alive(p) for p in two_pids) and all(alive(p) for p in one_pids) and one.poll() is None
    # No tag, and one live shard this machine started on exactly these nodes: that one (its record says which).
    rest = _c3("shard", "stop", "--nodes", "b,a")
    assert rest.returncode == 0, rest.stdout + rest.stderr
    assert f"c3: stopped shard {one_tag} on b, a" in rest.stdout and "ray stop" not in rest.stdout
    assert one.wait(timeout=60) == 0 and not any(alive(p) for p in one_pids)


def test_without_a_tag_several_shards_on_the_nodes_are_refused_by_name(two_shards):
    one_pids, two_pids = two_shards[1]
    refused = _c3("shard", "stop", "--nodes", "a,b", "--backend", "mp")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    first = refused.stderr.splitlines()[0]
    assert first.startswith("c3: error: ") and "shards run on a, b: " in first, refused.stderr
    assert _tag_of(one_pids[0]) in first and _tag_of(two_pids[0]) in first
    assert "hint: name the one to stop: c3 shard stop " in refused.stderr and "--all" in refused.stderr
    assert all(alive(p) for p in one_pids + two_pids)


def test_a_tag_that_is_no_plain_name_or_unknown_is_one_line(tmp_path):
    bad = _c3("shard", "stop", "a-1$")
    assert bad.returncode == 2 and bad.stderr.startswith("c3: error: 'a-1$' is not a shard tag"), bad.stderr
    unknown = _c3("shard", "stop", "a-1")
    assert unknown.returncode == 2 and "no shard a-1 was started on this machine" in unknown.stderr and "hint: " in unknown.stderr
    both = _c3("shard", "stop", "a-1", "--all", "--nodes", "x")
    assert both.returncode == 2 and "name one shard or --all, not both" in both.stderr
    assert "Traceback" not in bad.stderr + unknown.stderr + both.stderr
