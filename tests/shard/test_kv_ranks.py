"""Each rank's KV memory read back from the lines its own engine logged, and the rank that binds (issue 24: "both
ranks' boot logs read back (KV per rank, the binding rank named)")."""

from __future__ import annotations

from backend.shard.kv_ranks import KvByRank

# As vLLM 0.32's CPU build logs them through c3 (one per rank; the number is VLLM_CPU_KVCACHE_SPACE).
CPU_A = "(EngineCore pid=812) INFO 12-07 09:30:11 [cpu_worker.py:98] Explicitly set (1.0/16.71) GiB for KV cache on node 0."
CPU_B = "(Worker_PP1 pid=90) INFO 12-07 09:30:12 [cpu_worker.py:98] Explicitly set (1.0/16.71) GiB for KV cache on node 0."
# A GPU boot: every rank states its own pool.
GPU_A = "(Worker_PP0 pid=1) INFO 11-02 10:00:00 [gpu_worker.py:298] Available KV cache memory: 12.41 GiB"
GPU_B = "(Worker_PP1 pid=2) INFO 11-02 10:00:00 [gpu_worker.py:298] Available KV cache memory: 9.87 GiB"


def test_the_rank_with_least_kv_memory_is_named_once_every_rank_has_logged():
    kv = KvByRank(["a", "b"])
    assert kv.feed("a", GPU_A) is None  # rank 1 has not spoken yet
    assert kv.feed("a", "Available KV cache memory: 1.00 GiB") is None  # a rank's second line changes nothing
    said = kv.feed("b", GPU_B)
    assert said == ("c3: KV per rank: rank 0 on a 12.41 GiB, rank 1 on b 9.87 GiB; binding: rank 1 on b "
                    "(least KV memory: every rank keeps as many blocks as it can)")
    assert kv.feed("b", GPU_B) is None  # said once


def test_equal_ranks_bind_alike_and_other_lines_are_ignored():
    kv = KvByRank(["a", "b"])
    for node, line in (("a", "Loading weights took 0.02 seconds"), ("a", CPU_A), ("c", CPU_B), ("b", "CPU KV cache size: 21,840 tokens")):
        assert kv.feed(node, line) is None
    assert kv.feed("b", CPU_B) == "c3: KV per rank: rank 0 on a 1.00 GiB, rank 1 on b 1.00 GiB; every rank alike, none binds"
