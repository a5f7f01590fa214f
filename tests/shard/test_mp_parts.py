"""Unit test: `shard status --backend mp` reads each rank's state from the tagged processes."""

from __future__ import annotations

from backend.shard.ops import NodeStatus, mp_parts


def test_each_rank_is_found_by_its_node_rank_on_its_node():
    serve = "/v/bin/python /v/bin/vllm serve /m --pipeline-parallel-size 2 --distributed-executor-backend mp --nnodes 2"
    nodes = [
        NodeStatus(node="a", reachable=True, processes=[{"pid": "11", "command": f"{serve} --node-rank 0 --port 8000"},
                                                         {"pid": "12", "command": "VLLM::EngineCore"}]),
        NodeStatus(node="b", reachable=True, processes=[{"pid": "21", "command": "VLLM::Worker_PP1"}]),
        NodeStatus(node="c", reachable=False, error="unreachable"),
    ]
    parts = mp_parts(nodes)
    assert [(p.node, p.part, p.state, p.pid) for p in parts] == [
        ("a", "vllm serve rank 0 (API)", "running", "11"),
        ("b", "vllm serve rank 1 (headless)", "not running", None),  # its serve process is gone, a child is not the rank
        ("c", "vllm serve rank 2 (headless)", "unreachable", None),
    ]
    nodes[1].processes.append({"pid": "22", "command": f"{serve} --node-rank 1 --headless"})
    assert mp_parts(nodes)[1].state == "running" and mp_parts(nodes)[1].pid == "22"
    # A rank number elsewhere in the line is not the rank.
    assert mp_parts([NodeStatus(node="a", reachable=True, processes=[{"pid": "1", "command": "vllm serve /m --port 0"}])])[0].state == "not running"
