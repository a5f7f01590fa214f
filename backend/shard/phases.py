"""The named phases of `c3 shard start`, each with its own deadline (DESIGN.md, Shard).

    reach       every node answers over SSH and runs the facts probe          (deadline reach_s)
    versions    the same Ray/Python/vLLM (or llama.cpp build) on every node, vllm present
    model       a model given as a path exists on every node that reads it (each vLLM rank; the rpc head)
    plan        tp × pp against the GPUs, what the engine build can run, the head's address
    ports       the API and rendezvous ports free on the head
    link        each worker routes to the head and connects to its rendezvous port   (link_s)
    services    --stop-services on every node
    start       each node's part spawned
    rendezvous  Ray's head answers and each worker joins / each rpc-server listens   (rendezvous_s)
    load        every part started, until the head's /models answers (weights loaded) (load_s)
    first_token one `max_tokens: 1` completion through the head returns a token         (first_token_s)
    serve       serving; a part that ends here ends the shard

A failure is one `PhaseFailure`: `phase <name> failed on node <node>: <reason>`, with the last lines
of that node's output when it had any; the runner has stopped every part by the time it surfaces.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from backend.errors import C3Error, PhaseFailure, UsageError
from backend.remote.node import Node, local_identities, resolved_addresses
from backend.shard.models import NodeFacts


@dataclass
class Timing:
    """Deadlines for a start (generous: a loaded 2-core CI box, or a Spark loading 100 GB)."""

    reach_s: float = 60
    """The facts probe on each node (after its SSH connection opened)."""
    link_s: float = 30
    """Each worker's route and TCP connect toward the head."""
    rendezvous_s: float = 90
    """Until `ray status` answers on the head, until each worker shows up there, or until each
    rpc-server accepts connections."""
    load_s: float = 3600
    """From the last part started until the head's /models answers."""
    first_token_s: float = 300
    """From /models answering until one completion's token comes back (a CPU build's first request
    may compile first)."""
    settle_s: float = 3.0
    """After an error answer in first_token, how long a part that is ending gets to end (it is then named)."""
    kill_grace_s: float = 15
    """TERM → KILL grace for each part."""
    poll_s: float = 1.0
    """Between status polls."""
    progress_s: float = 30.0
    """How often a long phase says it is still waiting."""


DEADLINES = {"reach": "reach_s", "link": "link_s", "rendezvous": "rendezvous_s", "load": "load_s", "first_token": "first_token_s"}
"""The phases `--deadline PHASE=SECONDS` may set, and their Timing fields."""


def timing_with(deadlines: dict[str, float]) -> Timing:
    """Timing with `--deadline` values over the defaults (names and values checked by `parse_deadline`)."""
    timing = Timing()
    for phase, seconds in deadlines.items():
        setattr(timing, DEADLINES[phase], seconds)
    return timing


def parse_deadline(text: str) -> tuple[str, float]:
    """`PHASE=SECONDS` → (phase, seconds); a usage error naming the value otherwise."""
    phase, sep, value = text.partition("=")
    phase = phase.strip()
    if not sep or phase not in DEADLINES:
        raise UsageError(f"--deadline {text!r} is not PHASE=SECONDS with PHASE one of {', '.join(DEADLINES)}")
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or not 1 <= seconds <= 86400:
        raise UsageError(f"--deadline {text!r}: seconds must be a number from 1 to 86400")
    return phase, seconds


def in_phase(phase: str, node: str, error: C3Error, *, tail: tuple[str, ...] = ()) -> PhaseFailure:
    """`error` as a failure of `phase` on `node`, keeping its reason, hint and exit code."""
    if isinstance(error, PhaseFailure):
        return error
    reason = getattr(error, "detail", None) or error.message
    return PhaseFailure(phase, node, reason, hint=error.hint, tail=tail, exit_code=error.exit_code)


def check_model(model: str, facts: dict[str, NodeFacts], readers: list[str], *, hint: str) -> None:
    """Phase model: the model's path exists on each of `readers` (probed as `model_present`; a hub id is not
    probed), else a failure on the first node that lacks it, listing every such node."""
    missing = [name for name in readers if facts[name].model_present is False]
    if missing:
        raise PhaseFailure("model", missing[0], f"model path {model} does not exist on {', '.join(missing)}", hint=hint)


def check_names(ordered: list[Node]) -> None:
    """Phase reach, before any connection: a worker registered by a name that resolves, here on the head, to
    an address of this machine (a stale /etc/hosts line, Debian's `127.0.1.1 NAME`) would be driven as this
    machine, its part started on the head. Nodes marked local, given by address, or by this machine's own
    names (localhost, its host name) mean this machine on purpose and pass."""
    head = ordered[0]
    for node in ordered[1:]:
        host = (node.ssh_host if node.ssh else node.address).strip().strip("[]").lower()
        if node.local_override or not node.local or host in local_identities() or not resolved_addresses(host):
            continue
        raise PhaseFailure(
            "reach", node.name,
            f"{node.name}'s name {host} resolves to {', '.join(resolved_addresses(host))} here on the head ({head.name}), "
            f"an address of this machine: {node.name}'s part would run on {head.name}",
            hint=f"fix {host} in /etc/hosts or DNS on {head.name} (a `127.0.1.1 {host}` line is the usual cause), "
                 f"or register {node.name} by its address (c3 node add)",
        )
