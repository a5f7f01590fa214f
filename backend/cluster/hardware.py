"""Launches that respect the hardware (issue 24): each rank's GPUs are checked against the recipe's
hardware (compute capability, card family, memory per GPU, GPU count; `Hardware.required_sm`) and
picked by device id among the node's free GPUs — never `--gpus all`, never a GPU a running c3 pod or
another profile holds.

The facts come from the node itself, through its shell: the Nodes screen's nvidia-smi probe
(`backend.nodes.health.read_gpus`; on this machine under a simulated rig, the rig's GPUs) and `docker inspect` of the node's running c3 containers (pods carry
`io.c3.pod`, profiles `io.c3.profile`). A mismatch refuses (the hint names `--force`); with `--force` it
becomes a warning line in the plan. Too few free GPUs always refuses, naming who holds them.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from backend.cards import match_card
from backend.errors import C3Error, Refused
from backend.models import Gpu
from backend.nodes.health import NodeGpu, read_gpus
from backend.recipes import Recipe
from backend.recipes.schema import sm_key
from backend.remote.fleet import Fleet
from backend.remote.node import Node
from backend.remote.shell import NodeFailure
from backend.text import show

# The running c3 containers and the GPUs each was given: the device request's ids (`--gpus
# device=…`, the SDK's DeviceRequest; CDI ids as `nvidia.com/gpu=UUID`, Count -1 for all) or, in
# `env` mode, NVIDIA_VISIBLE_DEVICES. Only that one variable is printed: the rest of a container's
# environment may hold secrets and never leaves the node. Last, a pod's estate file (see `Own`).
_FORMAT = ('{{index .Config.Labels "io.c3.pod"}}|{{index .Config.Labels "io.c3.profile"}}|{{json .HostConfig.DeviceRequests}}|'
           '{{range .Config.Env}}{{if eq (index (split . "=") 0) "NVIDIA_VISIBLE_DEVICES"}}{{.}}{{end}}{{end}}|'
           '{{index .Config.Labels "io.c3.estate"}}')
HELD_QUERY = ("ids=$( { docker ps -q --filter label=io.c3.pod; docker ps -q --filter label=io.c3.profile; } | sort -u ); "
              f"[ -z \"$ids\" ] || docker inspect --format '{_FORMAT}' $ids")


@dataclass
class NodeGpus:
    """What one node said about its GPUs."""

    node: str
    gpus: list[NodeGpu] | None
    """nvidia-smi's list; None when the node could not be asked (see `error`)."""
    error: str | None = None
    """Why there is no list (node unreachable, nvidia-smi missing or failing)."""
    reachable: bool = True
    """False: the node did not answer, so nothing is known (a dry run shows placeholders)."""
    held: dict[str, str] = field(default_factory=dict)
    """GPU key (UUID, else index) → who holds it (`pod chat`, `profile big`)."""


def gpu_key(gpu: NodeGpu) -> str:
    return gpu.uuid or str(gpu.index)


@dataclass(frozen=True)
class Own:
    """What this c3 launched, when a simulated rig stands in for this machine: its GPUs are pretend, so
    only this c3's own containers can hold one — a pod of its estate file, a profile it launched. The
    machine's docker daemon may run real c3 pods of another c3 home (a test tier, a second user) whose
    GPU ids happen to be the rig's too (index `0`, or the same derived UUID): those hold nothing here."""

    estate: str
    """This c3's estate file."""
    profiles: frozenset[str]
    """This c3's profiles (profiles/NAME.yaml)."""

    def holds(self, pod: str, profile: str, estate: str) -> bool:
        return profile in self.profiles if profile else bool(estate) and _same_file(estate, self.estate)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def own_containers() -> Own:
    from backend import paths

    folder = paths.profiles_dir()
    return Own(str(paths.estate_file()), frozenset(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else frozenset())


def parse_held(text: str, gpus: list[NodeGpu], keep: set[str], own: Own | None = None) -> dict[str, str]:
    """`HELD_QUERY`'s lines → GPU key → holder; containers of the profiles in `keep` (the one being
    launched, the active one it stands down) do not count, nor, with `own`, any container not this c3's."""
    by_id = {str(g.index): gpu_key(g) for g in gpus} | {g.uuid: g.uuid for g in gpus if g.uuid}
    held: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.strip().split("|", 4)
        if len(parts) < 4:
            continue
        pod, profile, requests, env, estate = (p.strip() for p in (*parts, "")[:5])
        pod, profile, estate = ("" if v == "<no value>" else v for v in (pod, profile, estate))
        if profile in keep or not (pod or profile) or (own is not None and not own.holds(pod, profile, estate)):
            continue
        holder = f"pod {pod}" if pod else f"profile {profile}"
        ids: list[str] = []
        try:
            for request in json.loads(requests) or []:
                if isinstance(request, dict) and request.get("Count") == -1:
                    ids += list(by_id)
                elif isinstance(request, dict):
                    ids += [str(i) for i in request.get("DeviceIDs") or []]
        except ValueError:
            pass
        visible = env.partition("=")[2]
        ids += list(by_id) if visible == "all" else [v for v in visible.split(",") if v]
        for raw in ids:
            key = by_id.get(raw.strip().removeprefix("nvidia.com/gpu="))
            if key:
                held.setdefault(key, holder)
    return held


LocalGpus = Callable[[], list[Gpu]]
"""This machine's GPUs as its GPU probe reads them: handed in by the composition root
(`backend.wiring.local_rig_gpus`) when a simulated rig stands in for this machine (`C3_RIG`, `c3 demo`);
the cluster layer sits below the choice of simulated or real parts, so it never makes it itself."""


def _local_gpus(read: LocalGpus) -> tuple[list[NodeGpu] | None, str | None]:
    try:
        return [NodeGpu(g.index, g.name, g.total_mib, None, g.uuid, g.sm) for g in read()], None
    except C3Error as error:
        return None, error.message


async def probe(nodes: list[Node], fleet: Fleet, keep: set[str], timeout: float = 30.0,
                local_gpus: LocalGpus | None = None) -> dict[str, NodeGpus]:
    """Every node's GPUs and who holds them, concurrently; one node's failure is its own entry.
    `local_gpus`: this machine's GPUs when a simulated rig stands in for it (else nvidia-smi, as on any node)."""
    async def one(node: Node) -> NodeGpus:
        try:
            shell = await fleet.shell(node)
            gpus, error = _local_gpus(local_gpus) if node.local and local_gpus is not None else await read_gpus(shell, timeout)
            facts = NodeGpus(node.name, gpus, error)
            if gpus:
                held = await shell.run(HELD_QUERY, timeout=timeout)
                if not held.ok:
                    raise NodeFailure(node.name, "docker", f"cannot list the node's running c3 containers: {held.last_line()}")
                simulated = node.local and local_gpus is not None
                facts.held = parse_held(held.stdout, gpus, keep, own_containers() if simulated else None)
            return facts
        except NodeFailure as failure:
            return NodeGpus(node.name, None, failure.detail, reachable=False)

    return {f.node: f for f in await asyncio.gather(*(one(n) for n in nodes))}


@dataclass
class RankGpus:
    """The GPUs one rank gets."""

    devices: list[str] | None
    """Device ids for `--gpus device=…` (UUIDs when known); None: not known yet (placeholder)."""
    warnings: list[str] = field(default_factory=list)
    """Forced mismatches and facts that could not be judged, one line each."""


def _card_facts(gpu: NodeGpu) -> tuple[str | None, str | None]:
    """(compute capability, card family): nvidia-smi's compute_cap, else the card profile's."""
    card = match_card(Gpu(index=gpu.index, uuid=gpu.uuid or f"index-{gpu.index}", name=gpu.name, total_mib=gpu.total_mib))
    return gpu.sm or (card.sm if card else None), card.arch if card else None


def _misfits(recipe: Recipe, gpu: NodeGpu) -> tuple[list[str], list[str]]:
    """(why this GPU does not meet the recipe, what could not be judged)."""
    hw = recipe.hardware
    sm, arch = _card_facts(gpu)
    bad: list[str] = []
    unknown: list[str] = []
    need = hw.required_sm()
    if need:
        if sm is None:
            unknown.append(f"compute capability (needs ≥ {need[0]} for {need[1]})")
        elif sm_key(sm) < sm_key(need[0]):
            bad.append(f"compute capability {sm} < {need[0]} ({need[1]})")
    if hw.arch:
        if arch is None:
            unknown.append(f"card family (needs {' or '.join(hw.arch)})")
        elif arch.lower() not in {a.lower() for a in hw.arch}:
            bad.append(f"{arch}, not {' or '.join(hw.arch)}")
    if hw.min_memory_mib and gpu.total_mib is not None and gpu.total_mib < hw.min_memory_mib:
        bad.append(f"{gpu.total_mib} MiB < {hw.min_memory_mib} MiB")
    return bad, unknown


def _name(gpu: NodeGpu) -> str:
    return f"GPU {gpu.index} ({show(gpu.name, 60)})"


def pick(recipe: Recipe, facts: NodeGpus, *, force: bool) -> RankGpus:
    """The rank's GPUs on its node: `gpus_per_node` free GPUs that meet the recipe, in index order.
    Refused when they are not there (`--force` takes what is free, with a warning), and always when
    GPUs the rank needs are held by running pods or profiles."""
    need = recipe.hardware.gpus_per_node
    if not facts.reachable:
        return RankGpus(None, [f"GPUs not checked on {facts.node}: {facts.error}; a real launch checks them"])
    node, gpus = facts.node, facts.gpus or []
    free = [g for g in gpus if gpu_key(g) not in facts.held]
    judged = {gpu_key(g): _misfits(recipe, g) for g in gpus}
    fitting = [g for g in gpus if not judged[gpu_key(g)][0]]
    fitting_free = [g for g in fitting if g in free]
    if len(fitting_free) >= need:
        chosen = fitting_free[:need]
        warnings = [f"{node}: {_name(g)}: {', '.join(judged[gpu_key(g)][1])} not known, not checked" for g in chosen if judged[gpu_key(g)][1]]
        return RankGpus([gpu_key(g) for g in chosen], warnings)
    holders = ", ".join(f"GPU {g.index} by {facts.held[gpu_key(g)]}" for g in gpus if gpu_key(g) in facts.held)
    if len(fitting) >= need or len(free) < min(need, len(gpus)) or (force and not free and gpus):
        raise Refused(
            f"node {node}: recipe `{recipe.id}` needs {need} GPU(s); {len(fitting_free)} suitable of {len(gpus)} free — held: {holders}",
            hint="stop what holds them (`c3 pod down NAME`, `c3 profile stop NAME`), or launch on other nodes; --force never takes a held GPU",
        )
    if not gpus:
        reason = f"node {node} lists no GPUs ({facts.error or 'nvidia-smi lists none'}); recipe `{recipe.id}` needs {need}"
    else:
        misfit = "; ".join(f"{_name(g)}: {', '.join(judged[gpu_key(g)][0])}" for g in gpus if judged[gpu_key(g)][0])
        reason = f"node {node} has {len(fitting)} of the {need} GPU(s) recipe `{recipe.id}` needs: {misfit or 'too few GPUs'}"
    if not force:
        raise Refused(reason, hint=f"measured on {recipe.hardware.description}; launch on nodes with that hardware, or pass --force to launch anyway")
    chosen = (fitting_free + [g for g in free if g not in fitting_free])[:need]
    return RankGpus([gpu_key(g) for g in chosen], [f"--force: {reason}; rank gets {', '.join(_name(g) for g in chosen) or 'no GPU'}"])


def gpus_arg(devices: list[str]) -> str:
    """`--gpus` value for exactly these devices (the quotes: docker reads the value as CSV)."""
    return f'"device={",".join(devices)}"'
