"""What a shard plan is made of: the facts each node reports, the per-node part, the whole plan.

All of it is pure data: probing fills `NodeFacts`, `plan.build_plan` turns facts and options into a
`ShardPlan`, and the runner (or `--dry-run`) only reads the plan.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from backend.cluster.netfacts import Interface, NodeFacts, Route
from backend.models.names import host_url

Backend = Literal["ray", "mp", "rpc"]

NO_AUTH = ("llama.cpp's RPC protocol has no authentication: anyone who reaches a worker's RPC port can use "
           "and read its memory; c3 binds it only on each worker's cluster-link address (never 0.0.0.0): "
           "keep that link private")
"""Said by `shard start --help` and every `--backend rpc` plan (dry run and start)."""


__all__ = ["NO_AUTH", "Backend", "Interface", "NodeFacts", "NodePart", "Route", "ShardPlan", "Step"]
"""`Interface`, `NodeFacts` and `Route` live in backend.cluster.netfacts (shared with recipe launches)."""


class Step(BaseModel):
    """One long-running command of a node's part (`ray start …`, `vllm serve …`)."""

    model_config = ConfigDict(frozen=True)

    label: str
    """What the step is, e.g. `ray head`, `vllm serve (rank 1, headless)`."""
    argv: list[str]
    """The program and its arguments (never a secret)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment set for the step on top of the node's part env (never a secret)."""


class NodePart(BaseModel):
    """Everything c3 runs on one node for one shard."""

    node: str
    """Registry name."""
    role: Literal["head", "worker"]
    """Head runs the API server (and Ray's GCS); workers join it."""
    rank: int = Field(ge=0)
    """Node rank (0 = head); for mp it is `--node-rank`."""
    local: bool
    """Runs as a local process (the head, normally) instead of over SSH."""
    ssh: str | None = None
    """`USER@HOST:PORT` used to reach it (None when local); never contains a key."""
    address: str
    """Address this node advertises (VLLM_HOST_IP, Ray's --node-ip-address)."""
    interface: str
    """Interface toward the head (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME)."""
    gpus: int = Field(ge=0)
    """GPUs this node contributes."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment for every step on this node (address, interfaces, profile env), secrets excluded."""
    steps: list[Step] = Field(default_factory=list)
    """Commands in start order."""


class ShardPlan(BaseModel):
    """The whole shard: who is head, the layout, and each node's part, in start order."""

    backend: Backend
    """`ray` (Ray cluster, vLLM's Ray executor), `mp` (vLLM's multiprocessing executor) or `rpc` (llama.cpp RPC)."""
    model: str
    """What `vllm serve` gets as its model."""
    head: str
    """Head node's registry name."""
    head_address: str
    """Address workers reach the head at."""
    head_port: int
    """Ray GCS port (ray), torch rendezvous port (mp) or the first worker's RPC port (rpc)."""
    api_port: int
    """Port the head's OpenAI API listens on."""
    tp: int = Field(ge=1)
    """Tensor-parallel size."""
    pp: int = Field(ge=1)
    """Pipeline-parallel size."""
    parts: list[NodePart]
    """Head first, then workers in `--nodes` order."""
    stop_services: list[Step] = Field(default_factory=list)
    """Commands run on every node first with `--stop-services` (same on each)."""
    secret_env: list[str] = Field(default_factory=list)
    """Names of secret variables passed to every step (values never shown)."""
    tag: str
    """Value of C3_SHARD set on every process c3 starts, so `stop` finds them without a state file."""

    @property
    def api_url(self) -> str:
        """The head's OpenAI base URL, `http://HEAD:PORT/v1` (an IPv6 head in brackets); a dry run's
        placeholder address (`<…>`, no host yet) is shown as it is."""
        try:
            return host_url(self.head_address, self.api_port, path="/v1")
        except ValueError:
            return f"http://{self.head_address}:{self.api_port}/v1"

    @property
    def world_size(self) -> int:
        """GPUs the server expects: tp × pp."""
        return self.tp * self.pp
