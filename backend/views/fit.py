"""The fit-check as the front ends ask it: `c3 fit SLUG`, `c3 fit --config`, `c3 catalog [--fits-on]`
and `c3 bootlog` (each a named query with a typed result)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from pydantic import BaseModel, ConfigDict

from backend import limits
from backend.errors import UsageError
from backend.models import FitReport, MaxContext
from backend.models.catalog import Engine, SlugStatus

if TYPE_CHECKING:
    from backend.fit.bootlog import BootLogReport
    from backend.fit.learned import BootRecord


class SlugFit(BaseModel):
    """`c3 fit SLUG`: a catalog entry priced on GPUs of this machine or on card profiles."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    report: FitReport
    """The verdict and its numbers."""
    slug: str
    """The entry's slug."""
    tp: int
    """Its tensor-parallel size."""
    pp: int
    """Its pipeline-parallel size."""
    setup: str
    """How the engine is set up, one phrase (`vllm, tp 1 × pp 1, util 0.90`)."""
    where: str
    """What it was priced on (`GPU 0,1`, `cards rtx-3090`)."""
    max_context: MaxContext | None = None
    """`--max-context`: the largest context that fits and what bounds it (`report` is then the fit at that context)."""


def fit_slug(
    slug: str, *, gpus: Sequence[int] | None = None, cards: Sequence[str] | None = None, max_model_len: int | None = None, max_context: bool = False,
    learned: bool = True,
) -> SlugFit:
    """Price `slug` on host GPU indices (`gpus`) or on card profile ids (`cards`): exactly one of them. With
    `max_context`, find the largest context that fits instead of pricing a given one (Refused when c3 cannot).
    `learned`: use this rig's recorded boots of the same setup where there are some (`--no-learned`: never)."""
    from backend.catalog import load_catalog
    from backend.fit import fit_on_cards, fit_on_gpus, max_context_on_cards, max_context_on_gpus
    from backend.views.gpus import gpus_at

    if (gpus is None) == (cards is None):
        raise UsageError("give exactly one of --gpus and --card", hint="e.g. c3 fit vllm/qwen3-8b --card rtx-3090")
    if max_context and max_model_len is not None:
        raise UsageError("--max-context finds the context; --max-model-len fixes one: give one of them",
                         hint="e.g. c3 fit vllm/qwen3-8b --card rtx-3090 --max-context")
    catalog = load_catalog()
    entry = catalog.get(slug)
    found: MaxContext | None = None
    if cards is not None:
        if not cards:
            raise UsageError("--card needs at least one card id, e.g. --card rtx-3090")
        if max_context:
            found, report = max_context_on_cards(entry, list(cards), catalog=catalog, learned=learned)
        else:
            report = fit_on_cards(entry, list(cards), max_model_len=max_model_len, catalog=catalog, learned=learned)
        where = "cards " + ", ".join(cards)
    else:
        indices = list(gpus or ())
        if max_context:
            found, report = max_context_on_gpus(entry, gpus_at(indices), catalog=catalog, learned=learned)
        else:
            report = fit_on_gpus(entry, gpus_at(indices), max_model_len=max_model_len, catalog=catalog, learned=learned)
        where = "GPU " + ",".join(map(str, indices))
    if entry.engine == "llamacpp":
        setup = f"llama.cpp, layers split over {entry.gpu_count} GPU(s), --ctx-size {found.tokens if found else entry.max_model_len or 0:,}"
    else:
        fraction = "mem_fraction_static" if entry.engine == "sglang" else "util"
        setup = f"{entry.engine}, tp {entry.tp} × pp {entry.pp}, {fraction} {entry.gpu_memory_utilization:.2f}"
    return SlugFit(report=report, slug=entry.slug, tp=entry.tp, pp=entry.pp, setup=setup, where=where, max_context=found)


class ConfigFit(BaseModel):
    """`c3 fit --config`: any model priced from its config.json on given CUDA totals."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    report: FitReport
    """The verdict and its numbers."""
    title: str
    """What was priced, one line (`config.json (Qwen3ForCausalLM, vllm, tp 1 × pp 1, util 0.90) on 23.58 GiB`)."""
    max_context: MaxContext | None = None
    """`--max-context`: the largest context that fits and what bounds it (`report` is then the fit at that context)."""


def default_util(engine: str, version: tuple[int, int] | None) -> float:
    """The engine's own default fraction: SGLang ~0.85; vLLM 0.90, 0.92 from the v0.25 era on."""
    if engine == "sglang":
        return 0.85
    return 0.92 if version is not None and version >= (0, 25) else 0.90


def fit_config_file(
    config: Path, totals_gib: list[float], *, tp: int, pp: int = 1, engine: str = "vllm", engine_version: str | None = None,
    weights_gib: float | None = None, util: float | None = None, max_model_len: int | None = None, max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None, kv_cache_dtype: str = "auto", block_size: int | None = None, enforce_eager: bool = False,
    gpu_name: str | None = None, max_context: bool = False, kv_cache_memory_bytes: int | None = None, gguf: Path | None = None,
) -> ConfigFit:
    """Price any model from its config.json on CUDA totals (GiB; one value stands for every rank) with
    the engine's own memory rules. None knobs take the engine's defaults for `engine_version` (None:
    current); UsageError for knobs that do not add up. `kv_cache_memory_bytes` is vLLM's flag of that name (KV per rank,
    set outright). With `max_context`, the largest context that fits is
    searched for instead (Refused when c3 cannot compute it). `gguf` (llama.cpp): the weights are that file's
    tensor data, read from its header (backend/fit/gguf.py) — what llama-server reports as its model buffer."""
    from dataclasses import replace

    from backend.catalog.configs import load_config_file
    from backend.fit import fit_config
    from backend.fit.maxctx import largest_context
    from backend.fit.plan import Knobs, parse_version

    ranks = tp * pp
    totals = totals_gib * ranks if len(totals_gib) == 1 else list(totals_gib)
    if len(totals) != ranks:
        raise UsageError(f"--vram-gib lists {len(totals)} GPUs but tp {tp} × pp {pp} needs {ranks}", hint="give one value per rank, or one for all")
    try:
        if weights_gib is not None:
            limits.gib(weights_gib, "--weights-gib")
        if util is not None:
            limits.fraction(util, "--gpu-mem-util")
    except ValueError as error:
        raise UsageError(str(error)) from None
    if gguf is not None and (engine != "llamacpp" or weights_gib is not None):
        raise UsageError("--gguf goes with --engine llamacpp and instead of --weights-gib", hint="e.g. c3 fit --config config.json --engine llamacpp --gguf model.gguf ...")
    spec = load_config_file(config)
    version = parse_version(engine_version) if engine_version else None
    if engine_version and version is None:
        raise UsageError(f"--engine-version: `{engine_version}` is not a version like 0.11.0")
    knobs = Knobs(
        engine=engine, tp=tp, pp=pp, util=util if util is not None else default_util(engine, version), max_model_len=max_model_len,
        max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens, kv_cache_dtype=kv_cache_dtype, block_size=block_size,
        enforce_eager=enforce_eager, version=version, weights_gib=weights_gib, quantized=bool(spec.quant_method),
        kv_cache_memory_bytes=kv_cache_memory_bytes,
    )
    if max_context and max_model_len is not None:
        raise UsageError("--max-context finds the context; --max-model-len fixes one: give one of them")
    if gguf is not None:
        from backend.fit.gguf import tensor_data_bytes

        data = tensor_data_bytes(gguf)
        knobs = replace(knobs, weights_bytes=data, weights_how=f"tensor data of {gguf.name}: {data:,} bytes, read from its header")
    found = None
    if max_context:
        found, report = largest_context(lambda length: fit_config(spec, totals, replace(knobs, max_model_len=length), gpu_name=gpu_name),
                                        model_max=spec.max_position_embeddings, knobs=knobs)
    else:
        report = fit_config(spec, totals, knobs, gpu_name=gpu_name)
    title = (f"{config.name} ({spec.architecture or spec.model_type}, {engine}, tp {tp} × pp {pp}, util {knobs.util:.2f})"
             f" on {', '.join(f'{t:g}' for t in totals)} GiB")
    return ConfigFit(report=report, title=title, max_context=found)


RANK_GROUP = {"fits": 0, "tight": 0, "unknown": 1, "wont-fit": 2, "too-few": 3, "incompatible-hw": 4}


def fit_rank(verdict: str, available_kv_gib: float | None) -> tuple[int, float]:
    """Where a slug goes in a list ranked by fit (smaller first): what fits, by the KV memory it
    leaves per rank (the room for context and concurrent requests), most first; then unknown,
    won't fit, too few free GPUs, incompatible hardware. `tight` ranks with `fits`: its reasons
    are the estimate's uncertainty (an AWQ/GPTQ checkpoint's unpriced Marlin padding, weights
    estimated from shapes, an unknown vLLM version) or a thin margin, and a thin margin already
    shows as little KV left — an AWQ slug with 13.9 GiB left ranked below a BF16 one with 4.6 GiB
    when `tight` counted as "fits worse". The verdict stays on the row as a note."""
    return RANK_GROUP.get(verdict, len(RANK_GROUP)), -(available_kv_gib or 0.0)


class CatalogRow(BaseModel):
    """One slug as `c3 catalog --json` lists it; with `--fits-on`, its verdict there too."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    slug: str
    """`engine/name`."""
    engine: Engine
    """vllm, sglang, llamacpp or custom."""
    model: str
    """The Hugging Face model it serves (empty for a custom entry)."""
    tp: int
    """Tensor-parallel size."""
    pp: int
    """Pipeline-parallel size."""
    default_port: int
    """The port a new pod of it starts from."""
    status: SlugStatus
    """production, experimental or deprecated."""
    image: str
    """The engine image."""
    user: bool
    """From `$C3_HOME/catalog.d/` (replacing or adding to the built-ins)."""
    verdict: str | None = None
    """`--fits-on`: the fit-check's verdict on the first GPUs given (absent from the JSON without it)."""
    available_kv_gib: float | None = None
    """`--fits-on`: KV memory left (min over ranks)."""
    max_concurrency: float | None = None
    """`--fits-on`: max_model_len requests the KV pool holds at once."""


def catalog_rows(fits_on: Sequence[int] | None = None) -> list[CatalogRow]:
    """The merged catalog (built-ins plus `$C3_HOME/catalog.d/`); with `fits_on` (host GPU indices),
    only the slugs that need at most that many GPUs, each priced on the first of them."""
    from backend.catalog import load_catalog
    from backend.fit import fit_on_gpus
    from backend.views.gpus import gpus_at

    cat = load_catalog()
    gpus = gpus_at(list(fits_on)) if fits_on else None
    rows = []
    for entry in cat.entries:
        priced: dict[str, object] = {}
        if gpus is not None:
            if entry.gpu_count > len(gpus):
                continue
            report = fit_on_gpus(entry, gpus[: entry.gpu_count], catalog=cat)
            priced = {"verdict": report.verdict, "available_kv_gib": report.available_kv_gib, "max_concurrency": report.max_concurrency}
        # The verdict fields are set only when priced: `model_dump(exclude_unset=True)` is the JSON row.
        rows.append(CatalogRow(slug=entry.slug, engine=entry.engine, model=entry.model, tp=entry.tp, pp=entry.pp, default_port=entry.default_port,
                               status=entry.status, image=entry.image, user=entry.user, **priced))
    return rows


def read_boot_log(path: Path | None, stdin: BinaryIO | None = None) -> BootLogReport:
    """What an engine's boot log says it measured (weights, KV memory, tokens, concurrency). `path`
    None reads `stdin` (default: this process's), refusing more than the boot-log size limit."""
    return read_boot_log_and_text(path, stdin)[0]


def read_boot_log_and_text(path: Path | None, stdin: BinaryIO | None = None) -> tuple[BootLogReport, str]:
    """`read_boot_log`, and the text it read (what `--learn` records)."""
    from backend.fit.bootlog import parse_boot_log

    text = boot_log_text(path, stdin)
    return parse_boot_log(text), text


def boot_log_text(path: Path | None, stdin: BinaryIO | None = None) -> str:
    """The text of a boot log file, or of `stdin` when `path` is None (bounded either way)."""
    from backend.userfiles import LIMITS, read_text

    if path is None:
        cap = LIMITS["boot log"]
        raw = (stdin if stdin is not None else sys.stdin.buffer).read(cap + 1)
        if len(raw) > cap:
            raise UsageError(f"the boot log on stdin is larger than {cap // (1024 * 1024)} MiB", hint="pass the engine's start-up output, e.g. `docker logs c3-chat 2>&1 | head -c 10M`")
        return raw.decode("utf-8", errors="replace")
    return read_text(path, what="boot log", errors="replace") or ""


def learn_boot_log(text: str, slug: str, *, gpus: Sequence[int] | None = None, cards: Sequence[str] | None = None) -> tuple[BootRecord, int, str | None]:
    """`c3 bootlog FILE --learn SLUG`: record what the log measured as a boot of `slug` on these GPUs or cards, for later
    `c3 fit SLUG` (backend/fit/learned.py). (The record, the boots now on record for its setup, the warning of a store
    that had to be replaced.) Refused when the log measured nothing or the slug cannot be priced."""
    from backend.catalog import load_catalog
    from backend.errors import Refused
    from backend.fit import learn_boot_on, rank_for_card, rank_for_gpu
    from backend.fit.learned import read_store
    from backend.views.gpus import gpus_at

    if (gpus is None) == (cards is None):
        raise UsageError("--learn needs exactly one of --gpus and --card", hint="e.g. c3 bootlog boot.log --learn vllm/qwen3-8b --card rtx-3090")
    catalog = load_catalog()
    entry = catalog.get(slug)
    ranks = [rank_for_card(c) for c in cards] if cards is not None else [rank_for_gpu(g) for g in gpus_at(list(gpus or ()))]
    if len(ranks) != entry.gpu_count:
        raise UsageError(f"{entry.slug} runs on {entry.gpu_count} GPU(s) (tp {entry.tp} × pp {entry.pp}); {len(ranks)} given")
    rec, warning = learn_boot_on(entry, ranks, text, catalog=catalog)
    if rec is None:
        raise Refused(f"nothing recorded for {entry.slug}: the log has no memory lines c3 keeps, or the slug has no model spec",
                      hint="pass the engine's full start-up output; custom slugs cannot be priced")
    boots = sum(1 for b in read_store()[0].boots if b.key == rec.key)
    return rec, boots, warning

