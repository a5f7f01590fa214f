"""Command lines for vLLM's multiprocessing executor across nodes (no Ray).

Every node runs the same `vllm serve` with `--nnodes N --node-rank R --master-addr A --master-port P`;
rank 0 (the head, first in `--nodes`) serves the API, the others add `--headless` and serve nothing
(vLLM's parallelism_scaling docs; sparkrun's `vllm-distributed` runtime does the same).
"""

from __future__ import annotations

from backend.shard.models import Step


def serve(
    vllm: str,
    *,
    model: str,
    tp: int,
    pp: int,
    nnodes: int,
    rank: int,
    master: str,
    master_port: int,
    api_port: int,
    args: list[str],
) -> Step:
    """One node's `vllm serve` for rank `rank`."""
    argv = [
        vllm, "serve", model,
        "--tensor-parallel-size", str(tp),
        "--pipeline-parallel-size", str(pp),
        "--distributed-executor-backend", "mp",
        "--nnodes", str(nnodes),
        "--node-rank", str(rank),
        "--master-addr", master,
        "--master-port", str(master_port),
    ]
    if rank == 0:
        argv += ["--port", str(api_port)]
    else:
        argv.append("--headless")
    return Step(label="vllm serve (rank 0, API)" if rank == 0 else f"vllm serve (rank {rank}, headless)", argv=[*argv, *args])
