"""Human text for a plan: what `--dry-run` prints and what `start` announces before it runs anything."""

from __future__ import annotations

from backend.shard.models import NO_AUTH, ShardPlan
from backend.shard.plan import render_step


def describe(plan: ShardPlan, *, checks: list[str] | None = None) -> list[str]:
    """The plan node by node, numbered in start order, secrets as `<hidden>`."""
    if plan.backend == "rpc":
        return _describe_rpc(plan, checks or [])
    counts = ", ".join(f"{p.node}: {p.gpus}" for p in plan.parts)
    port_name = "Ray GCS" if plan.backend == "ray" else "rendezvous"
    lines = [
        f"shard {plan.model}: backend {plan.backend}, tp {plan.tp} × pp {plan.pp} = {plan.world_size} GPUs ({counts})",
        (f"head {plan.head} at {plan.head_address} ({port_name} port {plan.head_port}); "
         f"API {plan.api_url}"),
    ]
    for check in checks or []:
        lines.append(f"  ✓ {check}")
    order = start_order(plan)
    number = {key: i + 1 for i, key in enumerate(order)}
    for part in plan.parts:
        where = "local" if part.local else f"ssh {part.ssh}"
        lines.append(f"[{part.node}] {part.role} (rank {part.rank}), {where}, address {part.address} on {part.interface}, {part.gpus} GPU(s)")
        for step in plan.stop_services:
            lines.append(f"  0. {render_step({}, step, [])}")
        for index, step in enumerate(part.steps):
            lines.append(f"  {number[(part.node, index)]}. {render_step(part.env, step, plan.secret_env)}")
    lines.append(f"every process gets C3_SHARD={plan.tag}; Ctrl+C stops every node's part"
                 + (" and runs `ray stop` on every node" if plan.backend == "ray" else ""))
    return lines


def _describe_rpc(plan: ShardPlan, checks: list[str]) -> list[str]:
    workers = ", ".join(p.node for p in plan.parts[1:])
    lines = [
        f"shard {plan.model}: backend rpc (llama.cpp), layers split over {workers} by llama-server on {plan.head}",
        f"head {plan.head} at {plan.head_address}; API {plan.api_url}",
        f"WARNING: {NO_AUTH}",
        *(f"  ✓ {check}" for check in checks),
    ]
    number = {key: i + 1 for i, key in enumerate(start_order(plan))}
    for part in plan.parts:
        where = "local" if part.local else f"ssh {part.ssh}"
        lines.append(f"[{part.node}] {part.role}, {where}, address {part.address} on {part.interface}")
        lines.extend(f"  {number[(part.node, i)]}. {render_step(part.env, step, plan.secret_env)}" for i, step in enumerate(part.steps))
    lines.append(f"every process gets C3_SHARD={plan.tag}; Ctrl+C stops every node's part")
    return lines


def start_order(plan: ShardPlan) -> list[tuple[str, int]]:
    """(node, step index) in the order the runner starts them.

    Ray: head's Ray, then each worker's Ray one by one (simultaneous joins race, ray#59778), then the
    server on the head. mp: the head's rank 0 first, then the workers. rpc: every worker's rpc-server,
    then llama-server on the head (it connects to them as it loads).
    """
    order: list[tuple[str, int]] = []
    head = plan.parts[0]
    if plan.backend == "rpc":
        order = [(p.node, i) for p in plan.parts[1:] for i in range(len(p.steps))]
        return order + [(head.node, i) for i in range(len(head.steps))]
    order.append((head.node, 0))
    for part in plan.parts[1:]:
        order.extend((part.node, i) for i in range(len(part.steps)))
    order.extend((head.node, i) for i in range(1, len(head.steps)))
    return order
