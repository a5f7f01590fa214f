"""What the cockpit's forms and keys ask for, as typed inputs of the node, pod, recipe and pool writes.

Plain frozen dataclasses (the modals build them on the event loop, where pydantic is not imported).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NewPod:
    """A pod to plan (`c3 pod create NAME --slug S --gpus 0,1 [--port P]`)."""

    name: str
    slug: str
    gpus: tuple[int, ...]
    port: int | None = None
    """None: the slug's default port + 20 × pods, first free."""
    on_demand: bool = False
    """`--on-demand`: the gateway starts and stops it; it may share GPUs with other on-demand pods."""
    sleep_mode: bool = False
    """`--sleep-mode`: a vLLM pod launched with sleep mode; the gateway sleeps and wakes it instead of stop/boot."""


@dataclass(frozen=True)
class NewNode:
    """A node to register (`c3 node add NAME --host URL --ssh USER@HOST [--ssh-key PATH] [--local]`)."""

    name: str
    host: str
    ssh: str
    ssh_key: str | None = None
    local: bool = False
    """Driven without SSH whatever `ssh` names."""


@dataclass(frozen=True)
class RecipeLaunch:
    """A recipe to launch on nodes in rank order (rank 0 = first)."""

    recipe: str
    nodes: tuple[str, ...]
    allow_unpinned: bool = False
    """Launch even though the image is not pinned by digest (`--allow-unpinned`)."""
    overrides: tuple[str, ...] = ()
    """`key=value` entries, as `c3 recipes launch --set` takes them (parsed and checked by the backend)."""
    profile: str | None = None
    """Profile name (`--name`; default: the recipe id)."""
    force: bool = False
    """Launch although the nodes' GPUs do not meet the recipe's hardware (`--force`); never onto held GPUs."""


@dataclass(frozen=True)
class PoolRouter:
    """Which running pool router a drain or undrain goes to (`c3 pool drain NODE --port P`): the cockpit
    names it by the port of the pool whose row it shows, so a second router never makes the key ambiguous."""

    port: int
    host: str | None = None
    """Its `--bind` host, when one was named (None: the router's status file says)."""


@dataclass(frozen=True)
class ShardStop:
    """Which shard the cockpit's stop key stops (`c3 shard stop TAG`): its nodes come from its record."""

    tag: str
    """Its C3_SHARD value (`HEAD-PORT`)."""


@dataclass(frozen=True)
class ProcessSignal:
    """A signal for one GPU process (`c3 gpus kill PID [--signal S] [--foreign]`, the process view's keys)."""

    pid: int
    """Host pid, as `c3 gpus --processes` lists it."""
    signal: str = "TERM"
    """`TERM`, `KILL`, `INT` or `HUP`."""
    foreign: bool = False
    """The user chose to signal a process that is no c3 pod's (`--foreign`; the cockpit's distinct confirm key)."""


@dataclass(frozen=True)
class PodEdit:
    """New GPUs, slug and/or port for a pod (`c3 pod edit NAME [--gpus 0,1] [--port P] [--slug S]`); None keeps it."""

    name: str
    gpus: tuple[int, ...] | None = None
    port: int | None = None
    slug: str | None = None
