"""Command lines for the Ray backend: head, workers, the server on the head, status and stop.

Ray is started with `--block` so each node's Ray lives exactly as long as the process c3 started
(SIGTERM to it stops that node's Ray); `ray stop` on every node afterwards catches stragglers.
The dashboard stays off: vLLM does not need it and its job API runs arbitrary code for anyone who
can reach it (vLLM's own docs warn that inter-node traffic is unauthenticated).
"""

from __future__ import annotations

from backend.shard.models import Step


def head_start(ray: str, *, address: str, port: int, gpus: int) -> Step:
    """`ray start --head` on the head, bound to the chosen address."""
    return Step(
        label="ray head",
        argv=[
            ray, "start", "--head", "--block",
            f"--port={port}",
            f"--node-ip-address={address}",
            f"--num-gpus={gpus}",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ],
    )


def worker_start(ray: str, *, head: str, port: int, address: str, gpus: int) -> Step:
    """`ray start --address HEAD:PORT` on a worker."""
    return Step(
        label="ray worker",
        argv=[
            ray, "start", "--block",
            f"--address={head}:{port}",
            f"--node-ip-address={address}",
            f"--num-gpus={gpus}",
            "--disable-usage-stats",
        ],
    )


def serve(vllm: str, *, model: str, tp: int, pp: int, api_port: int, head: str, ray_port: int, args: list[str]) -> Step:
    """`vllm serve` on the head with vLLM's Ray executor, attached to the running cluster."""
    return Step(
        label="vllm serve (ray executor)",
        argv=[
            vllm, "serve", model,
            "--tensor-parallel-size", str(tp),
            "--pipeline-parallel-size", str(pp),
            "--distributed-executor-backend", "ray",
            "--port", str(api_port),
            *args,
        ],
        env={"RAY_ADDRESS": f"{head}:{ray_port}"},
    )


def status_argv(ray: str, *, head: str, port: int) -> list[str]:
    """`ray status` against the cluster's GCS."""
    return [ray, "status", f"--address={head}:{port}"]


def stop_argv(ray: str, grace_s: int = 10) -> list[str]:
    """`ray stop`: SIGTERM, then SIGKILL after `grace_s`.

    By the time c3 runs it the server is gone, so nothing is left to drain; Ray 2.60's own default
    (16 s, plus up to 30 s of node draining in `ray start --block`) only makes Ctrl+C feel hung.
    """
    return [ray, "stop", f"--grace-period={grace_s}"]


def parse_status(text: str) -> tuple[int, float | None]:
    """Active node count and total GPUs from `ray status` output (`0.0/2.0 GPU`)."""
    active = 0
    section = ""
    gpus: float | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.endswith(":") and line[:-1] in {"Active", "Pending", "Recent failures", "Idle"}:
            section = line[:-1]
            continue
        if section == "Active" and "node_" in line:
            active += 1
        elif line and section == "Active" and not line.startswith(("(", "1 ", "0 ")) and ":" in line:
            section = ""
        if line.endswith(" GPU") and "/" in line:
            try:
                gpus = float(line.split()[0].split("/")[1])
            except (IndexError, ValueError):
                pass
    return active, gpus
