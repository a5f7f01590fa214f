"""A fit that learns from every boot: what the engine measured at boot, kept next to what c3 predicted.

When a pod boots to serving, c3 reads the engine's own boot log (`bootlog.parse_boot_log`) and records
the measured terms — weights, KV memory and tokens, activation/non-torch/graph memory, llama.cpp's
buffers — under a key of what decides them: engine and build (`engine_version`, else the image
reference), model and a hash of its config, the card on every rank, TP × PP and the memory flags. The
next fit of the same key prices with the measured figures and says so (`learned from N boots on DATE`);
`c3 fit --no-learned` ignores them.

The store is one small JSON file, `$C3_STATE/fit/learned.json`: written atomically under a lock (two
pods booting at once), read through the bounded file reader, capped at `MAX_BOOTS` records (oldest
dropped) and `KEEP_PER_KEY` per key. A store that cannot be read (not JSON, a FIFO, over the cap, a
schema c3 does not know) is one warning and an empty store — a fit never fails on it — and the next
boot replaces it. Its figures are never trusted without a check: a record whose KV memory exceeds what
the card's budget leaves beside the weights, or whose weights are well under the checkpoint's, is
ignored with a note, so a hand-edited store cannot make a fit optimistic beyond what physics allows;
with several boots the most pessimistic one is used.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from backend.fit.plan import GIB, Knobs, Rank, parse_version
from backend.models.fit import LearnedMark

if TYPE_CHECKING:
    from backend.fit.bootlog import BootLogReport
    from backend.models import CatalogEntry, FitReport, ModelSpec

MAX_BOOTS = 500
"""Records in the store at most (about 600 bytes each): the oldest go first."""
KEEP_PER_KEY = 10
"""Boots kept per key: a fit uses the most pessimistic of them."""
STORE_LIMIT = 1024 * 1024
"""The bounded reader's cap for the store; c3 never writes one this large."""
OFF_LIMIT_GIB = 0.5
"""A boot whose KV memory lands further than this from c3's prediction is flagged (in `c3 fit` and the cockpit)."""
WEIGHTS_FLOOR = 0.9
"""A measured weights figure under this share of the checkpoint's per-rank bytes is not believed."""


class Measured(BaseModel):
    """What the engine logged at boot (None: the log did not say)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    engine_version: str | None = None
    """The version the log names (`0.32.0`)."""
    weights_gib: float | None = None
    """vLLM `Model loading took` (largest over ranks); llama.cpp: every model buffer, summed, per rank."""
    available_kv_gib: float | None = None
    """vLLM `Available KV cache memory`, the minimum over ranks."""
    kv_cache_tokens: int | None = None
    """`GPU/CPU KV cache size: N tokens`."""
    max_model_len: int | None = None
    """The context length of the concurrency line."""
    activation_gib: float | None = None
    """Torch activation peak, where the log prints it."""
    non_torch_gib: float | None = None
    """Non-torch memory, where the log prints it."""
    cudagraph_gib: float | None = None
    """CUDA-graph memory actually taken."""
    kv_mib: float | None = None
    """llama.cpp: KV buffers, summed over devices."""
    compute_gib: float | None = None
    """llama.cpp: the largest compute buffer of one device."""
    kv_device: str | None = None
    """`GPU` / `CPU` (vLLM's CPU build, llama.cpp without offload)."""


class Predicted(BaseModel):
    """What c3's fit said before the boot (for the error it made)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    verdict: str
    """The fit's verdict."""
    weights_gib: float | None = None
    """Weights of the heaviest rank."""
    available_kv_gib: float | None = None
    """KV memory, minimum over ranks."""
    kv_cache_tokens: int | None = None
    """Tokens the pool was priced to hold."""


class BootRecord(BaseModel):
    """One boot's measurement, under the key of what decides it."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    key: str
    """Hash of the fields below that name the setup (`boot_key`)."""
    recorded_at: str
    """UTC, ISO 8601 (a store whose dates do not parse is not read: they are shown in every learned fit)."""
    pod: str = ""
    """The pod that booted."""
    slug: str
    """Its catalog slug."""
    engine: str
    """vllm | llamacpp | sglang."""
    build: str
    """The entry's engine_version, else its image reference."""
    model: str
    """The model it served."""
    config_hash: str
    """sha256 (12 hex) of the model spec c3 priced."""
    cards: list[str]
    """Card profile (or NVML name) per rank."""
    tp: int
    """Tensor-parallel size."""
    pp: int
    """Pipeline-parallel size."""
    flags: str
    """sha256 (12 hex) of the memory-deciding knobs."""
    measured: Measured
    """What the engine logged."""
    predicted: Predicted | None = None
    """What c3 predicted before the boot."""


    @field_validator("recorded_at")
    @classmethod
    def _iso(cls, value: str) -> str:
        return datetime.fromisoformat(value).isoformat(timespec="seconds")


class Store(BaseModel):
    """The file as a whole."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    version: int = 1
    """Schema version."""
    boots: list[BootRecord] = Field(default_factory=list)
    """Oldest first."""


def store_path() -> Path:
    """`$C3_STATE/fit/learned.json`."""
    from backend.paths import state_home

    return state_home() / "fit" / "learned.json"


def read_store(path: Path | None = None) -> tuple[Store, str | None]:
    """The store and, when it could not be read, the one warning that says so (the store is then empty)."""
    from backend.errors import C3Error
    from backend.userfiles import read_bytes

    path = path or store_path()
    try:
        raw = read_bytes(path, what="fit store", limit=STORE_LIMIT, missing_ok=True)
        if raw is None:
            return Store(), None
        store = Store.model_validate(json.loads(raw.decode("utf-8")))
        if store.version != 1:
            raise ValueError(f"schema version {store.version} is not 1")
        return store, None
    except (C3Error, OSError, ValueError, ValidationError) as error:
        # ValidationError is a ValueError; json and UTF-8 errors are too. The reason is cut to one line.
        why = getattr(error, "message", None) or str(error).splitlines()[0]
        return Store(), f"fit store {path} ignored ({why[:160]}): fits are predicted until the next boot rewrites it"


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:12]


def entry_build(entry: CatalogEntry) -> str:
    """What names the engine's build: its pinned version, else the image (with its digest when pinned)."""
    if entry.engine_version:
        return entry.engine_version
    return f"{entry.image}@{entry.image_digest}" if entry.image_digest and "@" not in entry.image else entry.image


def boot_key(entry: CatalogEntry, spec: ModelSpec, ranks: list[Rank], knobs: Knobs) -> dict[str, object]:
    """The fields that decide a boot's memory, and `key`, their hash. `max_model_len` is in the key for
    llama.cpp only: vLLM's V1 profile runs max_num_batched_tokens, not the context, so its KV memory does
    not move with it, while llama.cpp's compute buffers do."""
    flags = {
        "util": knobs.util, "kv_cache_dtype": knobs.kv_cache_dtype, "enforce_eager": knobs.enforce_eager,
        "max_num_seqs": knobs.max_num_seqs, "max_num_batched_tokens": knobs.max_num_batched_tokens, "block_size": knobs.block_size,
        "extra_args": list(knobs.extra_args), "weights": entry.weights, "weights_bytes": knobs.weights_bytes,
        "hybrid_kv_env": knobs.hybrid_kv_env, "ctx": knobs.max_model_len if knobs.engine == "llamacpp" else None,
    }
    fields: dict[str, object] = {
        "engine": entry.engine, "build": entry_build(entry), "model": entry.model, "config_hash": _digest(spec.model_dump(mode="json")),
        "cards": [r.card or "?" for r in ranks], "tp": entry.tp, "pp": entry.pp, "flags": _digest(flags),
    }
    return {**fields, "key": _digest(fields)}


def measured_from(log: BootLogReport, ranks: int) -> Measured | None:
    """The terms a boot log gives, or None when it gives none worth keeping."""
    if log.engine == "llamacpp" and log.llamacpp_mib:
        model = sum(slots.get("model", 0.0) for slots in log.llamacpp_mib.values())
        kv = sum(slots.get("kv", 0.0) for slots in log.llamacpp_mib.values())
        compute = max((slots.get("compute", 0.0) for slots in log.llamacpp_mib.values()), default=0.0)
        return Measured(engine_version=log.engine_version, weights_gib=model / 1024 / max(1, ranks), kv_mib=kv, compute_gib=compute / 1024,
                        kv_device=log.kv_device)
    if log.available_kv_gib is None and log.kv_cache_tokens is None:
        return None
    return Measured(engine_version=log.engine_version, weights_gib=log.weights_gib, available_kv_gib=log.available_kv_gib,
                    kv_cache_tokens=log.kv_cache_tokens, max_model_len=log.max_model_len, activation_gib=log.activation_gib,
                    non_torch_gib=log.non_torch_gib, cudagraph_gib=log.cudagraph_actual_gib, kv_device=log.kv_device)


def record(rec: BootRecord, path: Path | None = None) -> str | None:
    """Add one boot to the store (atomically, under the store's lock); the warning of a store that had to be
    replaced, else None. OSError when the state folder cannot take it."""
    from backend.atomic import locked, write_atomic

    path = path or store_path()
    with locked(path):
        store, warning = read_store(path)
        same = [b for b in store.boots if b.key == rec.key]
        drop = {id(b) for b in same[: max(0, len(same) - KEEP_PER_KEY + 1)]}
        boots = [b for b in store.boots if id(b) not in drop] + [rec]
        store = Store(boots=boots[-MAX_BOOTS:])
        write_atomic(path, store.model_dump_json(indent=1, exclude_none=True) + "\n", mode=0o600)
    return warning


def learn_from_boot(entry: CatalogEntry, spec: ModelSpec, ranks: list[Rank], knobs: Knobs, log_text: str, *, pod: str = "",
                    predicted: FitReport | None = None) -> tuple[BootRecord | None, str | None]:
    """Record what a boot log measured for this setup: (the record, or None when the log gave nothing; a warning)."""
    from backend.fit.bootlog import parse_boot_log

    measured = measured_from(parse_boot_log(log_text), len(ranks))
    if measured is None:
        return None, None
    guess = None
    if predicted is not None:
        heaviest = max((g.weights_gib for g in predicted.gpus), default=None)
        guess = Predicted(verdict=predicted.verdict, weights_gib=heaviest, available_kv_gib=predicted.available_kv_gib,
                          kv_cache_tokens=predicted.kv_cache_tokens)
    key = boot_key(entry, spec, ranks, knobs)
    rec = BootRecord.model_validate({**key, "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"), "pod": pod, "slug": entry.slug,
                                     "measured": measured, "predicted": guess})
    return rec, record(rec)


def _believable(rec: BootRecord, ranks: list[Rank], knobs: Knobs, floor_gib: float | None) -> str | None:
    """Why a record is not believed (None: it is). Bounds from the card, not from the record itself."""
    m = rec.measured
    values = [v for v in (m.weights_gib, m.available_kv_gib, m.compute_gib) if v is not None]
    if any(not math.isfinite(v) or v < 0 for v in values):
        return "a figure is negative or not a number"
    if m.weights_gib is not None and floor_gib is not None and m.weights_gib < WEIGHTS_FLOOR * floor_gib:
        return f"weights {m.weights_gib:.2f} GiB are under {WEIGHTS_FLOOR:.0%} of the checkpoint's {floor_gib:.2f} GiB per rank"
    smallest = min((r.total_gib for r in ranks if r.total_gib is not None), default=None)
    if m.available_kv_gib is not None and smallest is not None and m.kv_device != "CPU":
        weights = max(m.weights_gib or 0.0, floor_gib or 0.0)
        bound = smallest * knobs.util - weights
        if m.available_kv_gib > bound + 0.01:
            return f"KV memory {m.available_kv_gib:.2f} GiB exceeds the {bound:.2f} GiB the budget leaves beside the weights"
    return None


def apply_learned(entry: CatalogEntry, spec: ModelSpec, ranks: list[Rank], knobs: Knobs) -> tuple[Knobs, LearnedMark | None, list[str]]:
    """`knobs` with this rig's measured figures for the setup, the mark that says so, and notes (a store that
    could not be read, records not believed). Unchanged knobs and no mark when there is nothing usable."""
    if entry.engine not in ("vllm", "llamacpp"):
        return knobs, None, []
    store, warning = read_store()
    notes = [f"warning: {warning}"] if warning else []
    key = boot_key(entry, spec, ranks, knobs)["key"]
    mine = [b for b in store.boots if b.key == key]
    if not mine:
        return knobs, None, notes
    floor = (knobs.weights_bytes / GIB / max(1, entry.tp * entry.pp)) if knobs.weights_bytes else None
    believed = []
    for rec in mine:
        why = _believable(rec, ranks, knobs, floor)
        if why is None:
            believed.append(rec)
        else:
            notes.append(f"learned boot of {rec.recorded_at[:10]} ignored: {why}")
    if not believed:
        return knobs, None, notes
    # The most pessimistic boot of the key: heaviest weights, least KV memory, largest compute buffer.
    weights = max((b.measured.weights_gib for b in believed if b.measured.weights_gib is not None), default=None)
    kv = min((b.measured.available_kv_gib for b in believed if b.measured.available_kv_gib is not None), default=None)
    compute = max((b.measured.compute_gib for b in believed if b.measured.compute_gib is not None), default=None)
    last = max(b.recorded_at for b in believed)[:10]
    latest = max(believed, key=lambda b: b.recorded_at)
    off = None
    if latest.predicted is not None and latest.predicted.available_kv_gib is not None and latest.measured.available_kv_gib is not None:
        off = round(latest.measured.available_kv_gib - latest.predicted.available_kv_gib, 2)
    mark = LearnedMark(boots=len(believed), last=last, off_by_gib=off, flagged=off is not None and abs(off) > OFF_LIMIT_GIB)
    learned = replace(knobs, weights_gib=weights if weights is not None else knobs.weights_gib, measured_kv_gib=kv, measured_compute_gib=compute,
                      weights_how=f"measured at boot ({mark.summary})" if weights is not None else knobs.weights_how)
    notes.append(f"{mark.summary}: the engine's own figures on this rig (c3 fit --no-learned for the prediction)")
    logged = latest.measured.engine_version
    if logged and knobs.version is not None and parse_version(logged) not in (None, knobs.version):
        # The key holds the image reference, not what runs in it: a rolling tag can move to another release.
        notes.append(f"warning: the last boot's engine logged version {logged}, but the slug is priced as {knobs.version[0]}.{knobs.version[1]}: "
                     "pin the image (or its engine_version) so fits and boots agree")
    return learned, mark, notes
