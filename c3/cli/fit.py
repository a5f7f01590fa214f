"""`c3 fit`: will a slug (or any config.json) boot on these GPUs, and with how much KV cache?"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from backend.errors import UsageError
from c3.cli.common import emit_json, json_option, parse_index_list
from c3.cli.terminal import error_line

if TYPE_CHECKING:  # the models and views load when a fit runs: `c3 fit --help` needs neither (issue 22)
    from backend.models import FitReport, MaxContext

KV_CHOICES = ["auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2"]
_MARK = {"fits": "✓", "tight": "⚠", "wont-fit": "×", "incompatible-hw": "×", "unknown": "?"}

HELP = """Price a launch with the engine's own memory rules before anything boots.

\b
  c3 fit SLUG --gpus 0,1            price a catalog slug on GPUs of this machine
  c3 fit SLUG --card rtx-3090,rtx-5090   ... on card profiles (no GPU needed)
  c3 fit SLUG --gpus 0,1 --max-context   the largest context that fits there, and which rank binds
  c3 fit SLUG --gpus 0 --no-learned  c3's prediction only, not what earlier boots measured here
  c3 fit --config config.json --vram-gib 23.58[,31.37] --tp N [...]
                                    price any model from its config.json on CUDA totals (GiB)

\b
--vram-gib is what CUDA sees per GPU (NVML total − reserved), one value per rank or one for all.
--weights-gib is what EACH RANK loads (vLLM's "Model loading took W GiB"); without it the weights
are params × dtype from config.json (MXFP4 experts at 4.25 bits) split by TP. --gpu-mem-util
defaults to vLLM's 0.90 (0.92 with --engine-version ≥ 0.25), SGLang's 0.85; max_num_seqs and
max_num_batched_tokens default to vLLM's per-GPU-class values (1024/8192 on ≥ 70 GiB unless the
--gpu-name is an A100, else 256/2048).

\b
Every pod that boots to serving leaves what its engine measured (weights, KV memory, compute
buffers) in $C3_STATE/fit/learned.json; a later SLUG fit of the same engine build, model, cards,
TP × PP and memory flags prices with those figures and says "learned from N boots on DATE"
("source": "learned" in --json).

\b
Exit codes: 0 fits or tight; 1 wont-fit, incompatible-hw, unknown (could not be priced),
an unknown slug or an unknown card id, --max-context where no context fits or c3 cannot compute
it (SGLang, custom); 2 malformed flags or files; 3 no GPU probe for --gpus.
"""


def _float_list(text: str, what: str) -> list[float]:
    values = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            value = float(part)
        except ValueError:
            raise UsageError(f"{what}: `{part}` is not a number", hint=f"e.g. {what} 23.58,31.37") from None
        if not math.isfinite(value) or value <= 0 or value > 4096:
            raise UsageError(f"{what}: {part} is not a memory size in GiB (0 < x ≤ 4096)")
        values.append(value)
    if not values:
        raise UsageError(f"{what} needs at least one value, e.g. {what} 23.58")
    return values


def _gib(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def render(report: FitReport, title: str) -> str:
    """The human table: one row per GPU rank, then the KV summary and the verdict."""
    lines = [title]
    if report.learned is not None:
        lines.append(f"measured on this rig: {report.learned.summary} (--no-learned for c3's prediction)")
        if report.learned.flagged and report.learned.off_by_gib is not None:
            lines.append(f"⚠ the last boot's KV memory landed {report.learned.off_by_gib:+.2f} GiB from c3's prediction (more than 0.5 GiB)")
    header = f"{'rank':<5}{'gpu':<5}{'card':<26}{'total':>8}{'budget':>8}{'weights':>9}{'activ':>7}{'other':>7}{'graphs':>8}{'KV':>8}{'blocks':>8}"
    if report.gpus:
        lines += ["", header]
        for rank, g in enumerate(report.gpus):
            card = (g.card or "")[:25]
            lines.append(
                f"{rank:<5}{'-' if g.index is None else g.index:<5}{card:<26}{g.total_gib:>8.2f}{g.budget_gib:>8.2f}{g.weights_gib:>9.2f}"
                f"{g.activation_gib:>7.2f}{g.non_torch_gib:>7.2f}{g.cudagraph_gib:>8.2f}{g.available_kv_gib:>8.2f}{'' if g.kv_blocks is None else g.kv_blocks:>8}"
            )
        lines.append("(GiB; other = non-torch: NCCL, workspaces, CUDA context; KV = what is left for the KV cache)")
    lines.append("")
    if report.kv_bytes_per_token is not None:
        extra = ""
        if report.block_size:
            extra = f" · block {report.block_size} tokens · {report.kv_groups} KV group(s)"
            if report.kv_padding_layers:
                extra += f" ({report.kv_padding_layers} padding layers)"
        if report.state_bytes_per_request:
            extra += f" · fixed state {report.state_bytes_per_request / 2**20:.1f} MiB per sequence"
        lines.append(f"KV bytes/token (per rank): {report.kv_bytes_per_token:,}{extra}")
    if report.kv_cache_tokens is not None:
        lines.append(
            f"KV pool: {report.kv_cache_tokens:,} tokens · max concurrency {report.max_concurrency or 0:.2f}× at {report.max_model_len or 0:,} tokens"
            f" · largest context that fits: {report.max_model_len_fits or 0:,} · available KV {_gib(report.available_kv_gib)} GiB (min over ranks)"
        )
    verdict = f"{_MARK.get(report.verdict, '?')} {report.verdict}"
    if report.reasons:
        verdict += ": " + "; ".join(report.reasons)
    lines.append(verdict)
    lines += [f"  note: {n}" for n in report.notes]
    return "\n".join(lines)


def render_max_context(found: MaxContext, ranks: int) -> str:
    """What `--max-context` found: the context, the bound that won, the KV budget it came from, the binding rank."""
    where = f"GPU {found.binding_gpu}" if found.binding_gpu is not None else (found.binding_card or "?")
    rank = f"rank {found.binding_rank} ({where}{', ' + found.binding_card if found.binding_gpu is not None and found.binding_card else ''})"
    if found.bound == "model":
        head = f"Largest context that fits: {found.tokens:,} tokens — the model's own maximum (max_position_embeddings) binds, not memory"
    else:
        head = f"Largest context that fits: {found.tokens:,} tokens — KV memory binds (the model's own maximum is {found.model_max:,})"
    blocks = f" = {found.kv_blocks:,} blocks of {found.granularity} tokens" if found.kv_blocks is not None else f" (steps of {found.granularity} tokens)"
    lines = [head, f"  from {found.kv_budget_gib:.2f} GiB of KV on {rank} at {found.kv_bytes_per_token:,} bytes/token{blocks}"]
    if ranks > 1:
        lines.append(f"  binding: {rank}" + (f", and {found.ranks_alike - 1} other rank(s) as tight" if found.ranks_alike > 1 else ""))
    if found.per_request_tokens != found.tokens:
        lines.append(f"  one request holds at most {found.per_request_tokens:,} tokens (--ctx-size is split over the -np streams)")
    return "\n".join(lines)


def _exit_for(report: FitReport, what: str) -> int:
    """0 for fits/tight; otherwise the one `c3: error:` line every failing command ends with, and 1."""
    if report.verdict in ("fits", "tight"):
        return 0
    reason = report.reasons[0] if report.reasons else "see the report above"
    error_line(f"{what}: {report.verdict}: {reason}")
    return 1


def _payload(report: FitReport, **extra: object) -> dict[str, Any]:
    data = report.model_dump(mode="json")
    data.update(extra)
    return data


def _show(report: FitReport, max_context: MaxContext | None, title: str, as_json: bool, **extra: object) -> None:
    """The report as JSON (with `max_context` when it was searched for) or as the human table."""
    if as_json:
        if max_context is not None:
            extra["max_context"] = max_context.model_dump(mode="json")
        emit_json(_payload(report, **extra))
        return
    click.echo(render(report, title))
    if max_context is not None:
        click.echo(render_max_context(max_context, len(report.gpus)))


def _fit_slug(slug: str, gpus: str | None, cards: str | None, max_model_len: int | None, as_json: bool, max_context: bool = False,
              learned: bool = True) -> int:
    from backend.views.fit import fit_slug

    if bool(gpus) == bool(cards):
        raise UsageError("give exactly one of --gpus and --card", hint="e.g. c3 fit vllm/qwen3-8b --card rtx-3090")
    if cards:
        found = fit_slug(slug, cards=[c.strip().lower() for c in cards.split(",") if c.strip()], max_model_len=max_model_len, max_context=max_context,
                         learned=learned)
    else:
        found = fit_slug(slug, gpus=parse_index_list(gpus or ""), max_model_len=max_model_len, max_context=max_context, learned=learned)
    _show(found.report, found.max_context, f"{found.slug} ({found.setup}) on {found.where}", as_json, slug=found.slug, tp=found.tp, pp=found.pp)
    return _exit_for(found.report, f"{found.slug} on {found.where}")


def _fit_config(
    config: Path, vram: str | None, tp: int | None, pp: int, weights_gib: float | None, util: float | None, max_model_len: int | None,
    max_num_seqs: int | None, batched: int | None, kv_dtype: str, engine: str, engine_version: str | None, as_json: bool,
    *, enforce_eager: bool = False, block_size: int | None = None, gpu_name: str | None = None, max_context: bool = False,
    kv_bytes: int | None = None, gguf: Path | None = None,
) -> int:
    from backend.views.fit import fit_config_file

    if vram is None or tp is None:
        raise UsageError("--config needs --vram-gib and --tp", hint="e.g. c3 fit --config config.json --vram-gib 23.58 --tp 1")
    found = fit_config_file(
        config, _float_list(vram, "--vram-gib"), tp=tp, pp=pp, engine=engine, engine_version=engine_version, weights_gib=weights_gib,
        util=util, max_model_len=max_model_len, max_num_seqs=max_num_seqs, max_num_batched_tokens=batched, kv_cache_dtype=kv_dtype,
        block_size=block_size, enforce_eager=enforce_eager, gpu_name=gpu_name, max_context=max_context, kv_cache_memory_bytes=kv_bytes,
        gguf=gguf,
    )
    _show(found.report, found.max_context, found.title, as_json, config=str(config), tp=tp, pp=pp)
    return _exit_for(found.report, config.name)


@click.command("fit", help=HELP)
@click.argument("slug", required=False)
@click.option("--gpus", help="Host GPU indices, e.g. 0,1 (uses the GPU probe).")
@click.option("--card", "cards", help="Card profile ids instead of real GPUs, e.g. rtx-3090,rtx-5090.")
@click.option("--config", type=click.Path(dir_okay=False, path_type=Path), help="A model's config.json.")
@click.option("--vram-gib", "vram", help="CUDA-visible GiB per rank (--config form), e.g. 23.58,31.37.")
@click.option("--tp", type=click.IntRange(1, 1024), help="Tensor-parallel size (--config form).")
@click.option("--pp", type=click.IntRange(1, 1024), default=1, show_default=True, help="Pipeline-parallel size (--config form).")
@click.option("--weights-gib", type=float, help="GiB each rank loads (vLLM's `Model loading took`).")
@click.option("--gpu-mem-util", "util", type=click.FloatRange(0.01, 1.0), help="vLLM gpu_memory_utilization / SGLang mem_fraction_static.")
@click.option("--max-model-len", type=click.IntRange(1, 1 << 26), help="Context length to price.")
@click.option("--max-context", is_flag=True, help="Find the largest context that fits (and the rank that binds) instead of pricing one.")
@click.option("--max-num-seqs", type=click.IntRange(1, 1 << 20), help="Concurrent sequences (--config form).")
@click.option("--max-num-batched-tokens", "batched", type=click.IntRange(1, 1 << 24), help="Tokens per step (--config form).")
@click.option("--kv-dtype", type=click.Choice(KV_CHOICES, case_sensitive=False), default="auto", show_default=True, help="KV-cache dtype (--config form).")
@click.option("--engine", type=click.Choice(["vllm", "sglang", "llamacpp"]), default="vllm", show_default=True, help="Whose rules (--config form).")
@click.option("--engine-version", help="Engine version the numbers should assume, e.g. 0.11.0 (--config form; default: current).")
@click.option("--enforce-eager", is_flag=True, help="No CUDA graphs (--config form): no graph memory is priced.")
@click.option("--block-size", type=click.IntRange(1, 4096), help="KV block size in tokens (--config form; default 16, enlarged for hybrids).")
@click.option("--kv-cache-memory-bytes", "kv_bytes", type=click.IntRange(1, 1 << 50),
              help="KV memory per rank in bytes, set outright as vLLM's flag of that name does (--config form; vLLM then ignores --gpu-mem-util).")
@click.option("--gpu-name", help="NVML name of the GPUs (--config form), e.g. 'NVIDIA A100-SXM4-80GB': vLLM's batch defaults and the interconnect depend on it.")
@click.option("--gguf", type=click.Path(dir_okay=False, path_type=Path),
              help="llama.cpp (--config form): the .gguf file; its tensor data (read from its header) is the weights, as llama-server maps them.")
@click.option("--no-learned", "no_learned", is_flag=True,
              help="Price from c3's rules only, ignoring what earlier boots of the same setup measured on this rig (SLUG form).")
@json_option
def fit(
    slug: str | None, gpus: str | None, cards: str | None, config: Path | None, vram: str | None, tp: int | None, pp: int,
    weights_gib: float | None, util: float | None, max_model_len: int | None, max_num_seqs: int | None, batched: int | None,
    kv_dtype: str, engine: str, engine_version: str | None, enforce_eager: bool, block_size: int | None, gpu_name: str | None, as_json: bool,
    max_context: bool, kv_bytes: int | None, no_learned: bool, gguf: Path | None,
) -> None:
    if max_context and max_model_len is not None:
        raise UsageError("--max-context finds the context; --max-model-len fixes one: give one of them", hint="drop --max-model-len to search for the largest")
    if slug and config:
        raise UsageError("give a SLUG or --config, not both")
    if config is not None:
        if gpus or cards:
            raise UsageError("--config prices on --vram-gib; --gpus/--card go with a SLUG")
        if no_learned:
            raise UsageError("--no-learned goes with a SLUG: --config is always priced from c3's rules")
        code = _fit_config(config, vram, tp, pp, weights_gib, util, max_model_len, max_num_seqs, batched, kv_dtype.lower(), engine, engine_version,
                           as_json, enforce_eager=enforce_eager, block_size=block_size, gpu_name=gpu_name, max_context=max_context,
                           kv_bytes=kv_bytes, gguf=gguf)
    elif slug:
        config_only = [n for n, v in (("--vram-gib", vram), ("--tp", tp), ("--weights-gib", weights_gib), ("--gpu-mem-util", util),
                                      ("--max-num-seqs", max_num_seqs), ("--max-num-batched-tokens", batched), ("--engine-version", engine_version),
                                      ("--block-size", block_size), ("--enforce-eager", enforce_eager or None), ("--gpu-name", gpu_name),
                                      ("--kv-cache-memory-bytes", kv_bytes), ("--gguf", gguf)) if v is not None]
        if config_only:
            raise UsageError(f"{', '.join(config_only)} only go with --config; a slug carries its own settings")
        code = _fit_slug(slug, gpus, cards, max_model_len, as_json, max_context, learned=not no_learned)
    else:
        raise UsageError("give a SLUG (with --gpus or --card) or --config", hint="see `c3 fit --help`")
    raise SystemExit(code)
