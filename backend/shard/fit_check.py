"""Phase plan, memory: before anything starts, a model given as a path is priced by the fit-check
(backend/fit, the engine's own memory rules) on the GPUs the nodes report — nvidia-smi's memory.total
of the GPUs each node gives the shard — and a `wont-fit` verdict refuses in the fit's own words, naming
the node whose GPU is the smallest (the rank that binds).

Only what can be priced is: the model's config.json readable on the head (c3 runs there), and every
node's GPU memory known. Hub ids, CPU-only nodes and `--gpus-per-node` without nvidia-smi pass unpriced.
"""

from __future__ import annotations

from pathlib import Path

from backend.errors import C3Error, PhaseFailure
from backend.remote.node import Node
from backend.shard.models import NodeFacts
from backend.shard.plan import ShardOptions
from backend.shard.probe import is_local_path


def _arg(args: list[str], flag: str) -> str | None:
    """`--flag V` or `--flag=V` from the engine's arguments."""
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def rank_memory(ordered: list[Node], facts: dict[str, NodeFacts], counts: dict[str, int]) -> list[tuple[str, float]] | None:
    """(node, GiB) for every rank, each node's GPUs in nvidia-smi's order; None when a node's memory is unknown."""
    ranks: list[tuple[str, float]] = []
    for node in ordered:
        mib = facts[node.name].gpu_mib
        if len(mib) < counts[node.name]:
            return None
        ranks.extend((node.name, m / 1024) for m in mib[: counts[node.name]])
    return ranks or None


def check_fit(ordered: list[Node], facts: dict[str, NodeFacts], options: ShardOptions, counts: dict[str, int]) -> str | None:
    """Refuse a `wont-fit` model (PhaseFailure, phase plan); the check's line for the plan when it was priced."""
    from backend.catalog.configs import load_config_file
    from backend.fit import fit_config
    from backend.fit.plan import Knobs

    head = ordered[0]
    config = Path(options.model) / "config.json"
    if not is_local_path(options.model) or not facts[head.name].local or not config.is_file():
        return None
    ranks = rank_memory(ordered, facts, counts)
    if ranks is None:
        return None
    try:
        spec = load_config_file(config)
        util, length = _arg(options.args, "--gpu-memory-utilization"), _arg(options.args, "--max-model-len")
        knobs = Knobs(engine="vllm", tp=options.tp, pp=options.pp, util=float(util) if util else 0.9,
                      max_model_len=int(length) if length else None, enforce_eager="--enforce-eager" in options.args,
                      quantized=bool(spec.quant_method))
        gpu_name = next((facts[n.name].gpu_names[0] for n in ordered if facts[n.name].gpu_names), None)
        report = fit_config(spec, [gib for _, gib in ranks], knobs, gpu_name=gpu_name)
    except (C3Error, ValueError):
        return None  # what c3 cannot price, the engine judges at load
    memory = ", ".join(f"{node} {gib:.1f} GiB" for node, gib in ranks)
    if report.verdict == "wont-fit":
        smallest = min(ranks, key=lambda r: r[1])[0]
        raise PhaseFailure(
            "plan", smallest, f"{options.model} does not fit on the ranks' GPUs ({memory}): {'; '.join(report.reasons)}",
            hint=f"`c3 fit --config {config} --tp {options.tp} --pp {options.pp} --vram-gib …` shows the numbers; more or larger GPUs, "
                 "a shorter --max-model-len or a quantized model",
        )
    return f"fit: {report.verdict} on the ranks' GPUs ({memory})"
