"""What the cockpit reads about a shard (issue 24): the runner's record (backend.shard.announce) and the
headline and per-rank states judged from it and the nodes' answers (backend.views.shard.judge)."""

from __future__ import annotations

import os
import time

from backend.remote.node import Node
from backend.shard import announce
from backend.shard.ops import NodeStatus, PartStatus, ShardStatus
from backend.views.shard import judge

A = Node(name="a", host="http://10.0.0.1:8000", ssh="u@10.0.0.1")
B = Node(name="b", host="http://10.0.0.2:8000", ssh="u@10.0.0.2")


def record(**changes) -> announce.ShardRecord:
    base = announce.ShardRecord(tag="a-29500", backend="mp", model="org/m", api_url="http://10.0.0.1:8000/v1", head_port=29500,
                                pid=os.getpid(), nodes=[A, B], state="serving", started_at=time.time())
    return base.model_copy(update=changes)


def polled(*states: str) -> ShardStatus:
    parts = [PartStatus(node=n, part=f"vllm serve rank {i}", state=s, pid=str(100 + i) if s == "running" else None)
             for i, (n, s) in enumerate(zip("ab", states, strict=True))]
    return ShardStatus(head="a", nodes=[NodeStatus(node=n, reachable=True) for n in "ab"], parts=parts)


def test_the_runner_record_is_read_back_and_a_dead_runner_reads_as_ended():
    announce.write(record())
    (back,) = announce.read_records()
    assert back.nodes == [A, B] and back.state == "serving" and not back.runner_gone
    assert (announce.shard_dir() / "shard-a-29500.json").stat().st_mode & 0o777 == 0o600  # SSH targets and key paths
    announce.write(record(pid=2**22 + 12345))  # no such process: the runner was killed without a word
    (gone,) = announce.read_records()
    assert gone.state == "ended" and gone.runner_gone and "process is gone" in (gone.reason or "")


def test_an_ended_record_is_kept_an_hour_then_removed():
    announce.write(record(state="ended", reason="SIGINT: stopped", ended_at=time.time() - 60))
    assert len(announce.read_records()) == 1
    assert announce.read_records(now=time.time() + announce.KEEP_ENDED_S) == []
    assert not list(announce.shard_dir().glob("*.json"))


def test_an_unreadable_record_is_skipped():
    announce.shard_dir().mkdir(parents=True)
    (announce.shard_dir() / "shard-x.json").write_text("{not json")
    announce.write(record())
    assert [r.tag for r in announce.read_records()] == ["a-29500"]


def test_every_rank_running_is_serving_and_a_dead_one_degrades_it_naming_its_node():
    live = judge(record(), polled("running", "running"))
    assert live.headline == "serving" and [(r.node, r.rank, r.pid, r.state) for r in live.ranks] == [("a", 0, "100", "running"), ("b", 1, "101", "running")]
    assert judge(record(state="starting"), polled("running", "running")).headline == "starting"
    live = judge(record(), polled("running", "not running"))
    assert live.headline == "degraded" and live.detail == "rank 1 on b is dead"
    assert [r.state for r in live.ranks] == ["running", "dead"]
    assert judge(record(), polled("running", "unreachable")).detail == "rank 1 on b is unreachable"


def test_a_shard_that_ended_names_the_node_that_failed_without_asking_the_nodes():
    why = "phase serve failed on node b: vllm serve (rank 1, headless) exited with status -9 while serving"
    live = judge(record(state="ended", reason=why, failed_node="b"), None)
    assert live.headline == "stopped" and live.detail == why
    assert [(r.node, r.part, r.state) for r in live.ranks] == [("a", "vllm serve rank 0 (API)", "stopped"),
                                                               ("b", "vllm serve rank 1 (headless)", "dead")]


def test_a_runner_killed_with_parts_left_says_how_to_stop_them():
    live = judge(record(state="ended", runner_gone=True, reason="the `c3 shard start` process is gone (killed?)"), polled("running", "not running"))
    assert live.headline == "degraded"
    assert live.detail.endswith(f"1 part(s) still running: c3 shard stop {live.tag}")
    assert judge(record(state="ended", runner_gone=True, reason="gone"), polled("not running", "not running")).headline == "stopped"


def test_a_rank_not_started_yet_is_starting_not_dead():
    live = judge(record(state="starting"), polled("running", "not running"))
    assert live.headline == "starting" and [r.state for r in live.ranks] == ["running", "starting"] and live.detail == ""
    assert judge(record(state="starting"), polled("running", "unreachable")).headline == "degraded"
