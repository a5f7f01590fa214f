"""The inputs every engine's pricer takes: the ranks (one per GPU) and the engine knobs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

GIB = 1024**3


@dataclass(frozen=True)
class Rank:
    """One GPU as the fit-check prices it."""

    total_gib: float | None
    """CUDA-visible total (None: unknown → verdict unknown)."""
    index: int | None = None
    card: str | None = None
    sm: str | None = None
    unified: bool = False
    how: str = ""
    """Where total_gib came from."""
    kv_dtypes: tuple[str, ...] | None = None
    nvswitch: bool | None = None
    """On an NVSwitch board (HGX/SXM: NCCL maps large NVLS buffers); None when not known."""
    nvml_name: str | None = None
    """NVML device name (vLLM's batch defaults key on it)."""
    nvml_total_gib: float | None = None
    """NVML total (vLLM's `get_device_total_memory`)."""


@dataclass(frozen=True)
class Knobs:
    """Engine settings that decide memory (always passed explicitly to the engine by c3)."""

    engine: str = "vllm"
    tp: int = 1
    pp: int = 1
    util: float = 0.90
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    kv_cache_dtype: str = "auto"
    block_size: int | None = None
    enforce_eager: bool = False
    version: tuple[int, int] | None = None
    weights_gib: float | None = None
    """Override: GiB each rank loads (vLLM's `Model loading took`)."""
    weights_bytes: int | None = None
    """Checkpoint total bytes, when known."""
    weights_how: str = ""
    quantized: bool = False
    quant_format: str | None = None
    """The checkpoint's quantisation as the catalog or config.json names it (`awq-int4`, `gptq`, `fp8`…)."""
    required_sm: str | None = None
    fallback_sm: str | None = None
    requires_homogeneous_arch: bool = False
    extra_notes: tuple[str, ...] = field(default_factory=tuple)
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    """The slug's extra engine flags (llama.cpp: `-kvu`, `--swa-full`, a draft model)."""
    kv_cache_memory_bytes: int | None = None
    """vLLM's `--kv-cache-memory-bytes`: KV memory per rank, set outright (vLLM then skips profiling for it and ignores
    gpu_memory_utilization). None: from the slug's own args when it passes the flag, else profiled."""
    hybrid_kv_env: bool | None = None
    """VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE as set in the slug's env (None: the version's default)."""
    measured_kv_gib: float | None = None
    """vLLM: KV memory per rank as this rig's engine measured it at boot (learned.py); replaces the profiled estimate."""
    measured_compute_gib: float | None = None
    """llama.cpp: the largest compute buffer this rig's engine allocated at boot (learned.py); replaces the estimate."""


def arg_value(args: tuple[str, ...] | list[str], *names: str) -> str | None:
    """The value the last of `names` gets in an engine argv (`--flag v` or `--flag=v`); None when absent."""
    value = None
    for i, arg in enumerate(args):
        if arg in names and i + 1 < len(args):
            value = args[i + 1]
        elif "=" in arg and arg.split("=", 1)[0] in names:
            value = arg.split("=", 1)[1]
    return value


def parse_version(text: str | None) -> tuple[int, int] | None:
    """`vllm/vllm-openai:v0.11.0` or `0.10.2` → (0, 11) / (0, 10); None when there is none."""
    if not text:
        return None
    match = re.search(r"v?(\d+)\.(\d+)(?:\.\d+)?", text.rsplit(":", 1)[-1] if ":" in text else text)
    if not match:
        return None
    return int(match.group(1)), int(match.group(2))


def sm_tuple(sm: str | None) -> tuple[int, int] | None:
    """`8.6` → (8, 6)."""
    if not sm:
        return None
    try:
        major, _, minor = sm.partition(".")
        return int(major), int(minor or 0)
    except ValueError:
        return None
