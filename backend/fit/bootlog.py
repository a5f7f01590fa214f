"""Read an engine's own memory figures back from its boot log (research-fitcheck.md §1.2).

Lines may carry any prefix — `(EngineCore_DP0 pid=…)`, `(Worker_TP1 pid=…)`, `(VllmWorker rank=1
pid=…)`, a Docker Compose container name, a timestamp — so every pattern is searched, not anchored.
Numbers may be comma-grouped (`262,144`). With TP/PP every rank logs its own `Available KV cache
memory`; the pool is the minimum, so that is what `available_kv_gib` reports (each rank's value is
kept too). GiB values carry two decimals (±5 MiB); token counts are exact. Older vLLM printed "GB"
for what it computed in GiB; both are read as GiB.

vLLM's CPU build sizes its KV pool from `VLLM_CPU_KVCACHE_SPACE` rather than a GPU profile: it logs
`Explicitly set (1.0/16.71) GiB for KV cache on node 0.` (or `Auto set (…)` when the variable is unset)
and then `CPU KV cache size: N tokens, …` — the device word follows the platform (GPU, CPU, XPU; "GPU +
host" with a host pool). Those lines land in the same fields as the GPU ones; `kv_device` says which.
llama.cpp names its buffers by backend device (`CUDA0`, `CPU`, `CPU_Mapped`, …).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

_NUM = r"(-?[\d][\d,]*(?:\.\d+)?)"


#: A llama.cpp backend buffer name: `CUDA0`, `ROCm1`, `Vulkan0`, `Metal`, `CPU`, `CPU_Mapped`, `CUDA_Host`.
_LLAMA_DEV = r"\b((?:CUDA|ROCm|Vulkan|SYCL|Metal|CPU)\d*(?:_[A-Za-z]+)?)"


def _num(text: str) -> float:
    return float(text.replace(",", ""))


_PATTERNS: dict[str, re.Pattern[str]] = {
    "weights": re.compile(r"(?:Model loading took|Loading model weights took)\s+" + _NUM + r"\s*Gi?B"),
    "available": re.compile(r"Available KV cache memory:\s*" + _NUM + r"\s*GiB"),
    "tokens": re.compile(r"\b([A-Z]PU(?: \+ host)?) KV cache size:\s*" + _NUM + r"\s*tokens"),
    "cpu_space": re.compile(r"(?:Explicitly|Auto) set \(" + _NUM + r"/" + _NUM + r"\)\s*GiB for KV cache"),
    "concurrency": re.compile(r"Maximum concurrency for\s+" + _NUM + r"\s+tokens per request:\s*" + _NUM + r"\s*x"),
    "graph_estimate": re.compile(r"Estimated CUDA graph memory:\s*" + _NUM + r"\s*GiB"),
    "graph_taken": re.compile(r"Graph capturing finished in\s+[\d.]+\s*secs?,\s*took\s+" + _NUM + r"\s*GiB"),
    "graph_pool": re.compile(r"CUDA graph pool memory:\s*" + _NUM + r"\s*GiB \(actual\),\s*" + _NUM + r"\s*GiB \(estimated\)"),
    "util_equiv": re.compile(r"--gpu-memory-utilization=" + _NUM + r" is equivalent"),
    "v07_budget": re.compile(r"total_gpu_memory \(" + _NUM + r"\s*GiB\) x gpu_memory_utilization \(" + _NUM + r"\)\s*=\s*" + _NUM + r"\s*GiB"),
    "v07_split": re.compile(
        r"model weights take " + _NUM + r"\s*GiB; non_torch_memory takes " + _NUM + r"\s*GiB; PyTorch activation peak memory takes "
        + _NUM + r"\s*GiB; the rest of the memory reserved for KV Cache is " + _NUM + r"\s*GiB"
    ),
    "v06": re.compile(r"Memory profiling results:.*?total_gpu_memory=" + _NUM + r"GiB.*?kv_cache_size=" + _NUM + r"GiB.*?gpu_memory_utilization=" + _NUM),
    "v0_blocks": re.compile(r"# (?:GPU|cuda) blocks:\s*" + _NUM),
    "profile_debug": re.compile(
        r"Total non KV cache memory:\s*" + _NUM + r"\s*GiB; torch peak memory increase:\s*" + _NUM + r"\s*GiB; non-torch forward increase memory:\s*"
        + _NUM + r"\s*GiB; weights memory:\s*" + _NUM + r"\s*GiB"
    ),
    "free_summary": re.compile(
        r"Free memory on device \(" + _NUM + r"/" + _NUM + r"\s*GiB\) on startup\. Desired GPU memory utilization is \(" + _NUM + r",\s*" + _NUM
        + r"\s*GiB\)\. Actual usage is " + _NUM + r"\s*GiB for consumed memory \(weights \+ non-torch\), " + _NUM + r"\s*GiB for peak activation, and "
        + _NUM + r"\s*GiB for CUDAGraph memory"
    ),
    "padding": re.compile(r"Add\s+(\d+)\s+padding layers"),
    "version": re.compile(r"(?:vLLM API server version|LLM engine \(v|vllm version|vLLM version)\s*v?(\d+\.\d+(?:\.\d+)?(?:\.post\d+|rc\d+)?)"),
    "sglang_tokens": re.compile(r"max_total_num_tokens=" + _NUM),
    "sglang_alloc": re.compile(r"KV Cache is allocated\. #tokens:\s*" + _NUM),
    "llama_model": re.compile(_LLAMA_DEV + r" model buffer size\s*=\s*" + _NUM + r"\s*MiB"),
    "llama_kv": re.compile(_LLAMA_DEV + r" KV buffer size\s*=\s*" + _NUM + r"\s*MiB"),
    "llama_compute": re.compile(_LLAMA_DEV + r" compute buffer size\s*=\s*" + _NUM + r"\s*MiB"),
}


class BootLogReport(BaseModel):
    """What a boot log says about memory. Every field is None when the log does not say it."""

    engine: str | None = None
    """vllm | sglang | llamacpp, by the lines seen."""
    engine_version: str | None = None
    """Version string the log names (e.g. `0.11.0`)."""
    v0: bool = False
    """Legacy V0 engine lines (block counts, GB units)."""
    weights_gib: float | None = None
    """`Model loading took X GiB` (largest over ranks)."""
    available_kv_gib: float | None = None
    """`Available KV cache memory` — minimum over ranks (the pool every rank is shrunk to)."""
    available_kv_gib_per_rank: list[float] = Field(default_factory=list)
    """Each rank's line, in log order."""
    kv_cache_tokens: int | None = None
    """`GPU KV cache size: N tokens` / `CPU KV cache size: N tokens` (or SGLang's max_total_num_tokens)."""
    kv_device: str | None = None
    """The device word of that line: `GPU`, `CPU` (vLLM's CPU build), `XPU`, `GPU + host`; for llama.cpp
    `CPU` when every KV buffer is a CPU one, else `GPU`."""
    max_concurrency: float | None = None
    """`Maximum concurrency for L tokens per request: C×`."""
    max_model_len: int | None = None
    """The L of that concurrency line."""
    cudagraph_estimate_gib: float | None = None
    """`Estimated CUDA graph memory` (v0.21+), or the estimate in the pool line."""
    cudagraph_actual_gib: float | None = None
    """`Graph capturing … took X GiB` / `CUDA graph pool memory: X GiB (actual)`."""
    gpu_memory_utilization: float | None = None
    """Util the log states."""
    total_gib: float | None = None
    """Device total the log states (`Free memory on device (f/T GiB)`, v0.6/0.7 total_gpu_memory; on
    vLLM's CPU build the NUMA node's memory from `Explicitly set (kv/total) GiB`)."""
    non_torch_gib: float | None = None
    """Non-torch memory (DEBUG profile line, v0.7 split)."""
    activation_gib: float | None = None
    """Torch activation peak (DEBUG profile line, v0.7 split, summary line)."""
    gpu_blocks: int | None = None
    """V0 `# GPU blocks`."""
    padding_layers: int | None = None
    """`Add N padding layers` (hybrid grouping)."""
    llamacpp_mib: dict[str, dict[str, float]] = Field(default_factory=dict)
    """llama.cpp per device: {"CUDA0": {"model": MiB, "kv": MiB, "compute": MiB}}."""

    @property
    def non_kv_gib(self) -> float | None:
        """budget − available, when the log gives both (what calibration solves for)."""
        if self.total_gib is None or self.gpu_memory_utilization is None or self.available_kv_gib is None:
            return None
        return self.total_gib * self.gpu_memory_utilization - self.available_kv_gib


def _llama_device(buffers: dict[str, dict[str, float]]) -> str | None:
    """llama.cpp: `CPU` when it allocated a KV buffer and every KV buffer is a CPU one."""
    kv = [device for device, slots in buffers.items() if "kv" in slots]
    if not kv:
        return None
    return "CPU" if all(device.startswith("CPU") for device in kv) else "GPU"


def rank_kv_gib(line: str) -> float | None:
    """The KV memory one rank's line states (`Available KV cache memory: X GiB`, or the CPU build's `Explicitly
    set (X/Y) GiB for KV cache`), in GiB; None when the line says neither."""
    if "KV cache" not in line:
        return None
    if m := _PATTERNS["available"].search(line):
        return _num(m.group(1))
    if m := _PATTERNS["cpu_space"].search(line):
        return _num(m.group(1))
    return None


def parse_boot_log(text: str) -> BootLogReport:
    """Every memory figure in `text` (any mix of ranks, prefixes and versions)."""
    found: dict[str, Any] = {}  # values of many types, each checked by BootLogReport
    weights: list[float] = []
    available: list[float] = []
    tokens: list[int] = []
    llama: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        if "Available KV cache memory" in line and (m := _PATTERNS["available"].search(line)):
            available.append(_num(m.group(1)))
        if (m := _PATTERNS["weights"].search(line)):
            weights.append(_num(m.group(1)))
            if "Loading model weights took" in line:
                found["v0"] = True
        if (m := _PATTERNS["tokens"].search(line)):
            found["kv_device"] = m.group(1)
            tokens.append(int(_num(m.group(2))))
        if (m := _PATTERNS["cpu_space"].search(line)):
            available.append(_num(m.group(1)))
            found["total_gib"] = _num(m.group(2))
        if (m := _PATTERNS["concurrency"].search(line)):
            found["max_model_len"] = int(_num(m.group(1)))
            found["max_concurrency"] = min(_num(m.group(2)), found.get("max_concurrency", float("inf")))
        if (m := _PATTERNS["graph_estimate"].search(line)):
            found["cudagraph_estimate_gib"] = _num(m.group(1))
        if (m := _PATTERNS["graph_pool"].search(line)):
            found["cudagraph_actual_gib"] = _num(m.group(1))
            found.setdefault("cudagraph_estimate_gib", _num(m.group(2)))
        elif (m := _PATTERNS["graph_taken"].search(line)):
            found["cudagraph_actual_gib"] = _num(m.group(1))
        if (m := _PATTERNS["util_equiv"].search(line)):
            found["gpu_memory_utilization"] = _num(m.group(1))
        if (m := _PATTERNS["v07_budget"].search(line)):
            found["total_gib"], found["gpu_memory_utilization"] = _num(m.group(1)), _num(m.group(2))
            found["v0"] = True
        if (m := _PATTERNS["v07_split"].search(line)):
            weights.append(_num(m.group(1)))
            found["non_torch_gib"], found["activation_gib"] = _num(m.group(2)), _num(m.group(3))
            available.append(_num(m.group(4)))
        if (m := _PATTERNS["v06"].search(line)):
            found["total_gib"], found["gpu_memory_utilization"] = _num(m.group(1)), _num(m.group(3))
            available.append(_num(m.group(2)))
            found["v0"] = True
        if (m := _PATTERNS["v0_blocks"].search(line)):
            found["gpu_blocks"] = int(_num(m.group(1)))
            found["v0"] = True
        if (m := _PATTERNS["profile_debug"].search(line)):
            found["activation_gib"], found["non_torch_gib"] = _num(m.group(2)), _num(m.group(3))
            weights.append(_num(m.group(4)))
        if (m := _PATTERNS["free_summary"].search(line)):
            found["total_gib"] = _num(m.group(2))
            found["gpu_memory_utilization"] = _num(m.group(3))
            found["activation_gib"] = _num(m.group(6))
            found.setdefault("cudagraph_estimate_gib", _num(m.group(7)))
        if (m := _PATTERNS["padding"].search(line)):
            found["padding_layers"] = int(m.group(1))
        if "version" not in found and (m := _PATTERNS["version"].search(line)):
            found["version"] = m.group(1)
        for key in ("sglang_tokens", "sglang_alloc"):
            if (m := _PATTERNS[key].search(line)):
                tokens.append(int(_num(m.group(1))))
                found["engine"] = "sglang"
        for key, slot in (("llama_model", "model"), ("llama_kv", "kv"), ("llama_compute", "compute")):
            if (m := _PATTERNS[key].search(line)):
                llama.setdefault(m.group(1), {})[slot] = _num(m.group(2))
                found["engine"] = "llamacpp"
    engine = found.get("engine")
    if engine is None and (weights or available or tokens or "max_concurrency" in found):
        engine = "vllm"
    return BootLogReport(
        engine=engine,
        engine_version=found.get("version"),
        v0=bool(found.get("v0")),
        weights_gib=max(weights) if weights else None,
        available_kv_gib=min(available) if available else None,
        available_kv_gib_per_rank=available,
        kv_cache_tokens=min(tokens) if tokens else None,
        kv_device=found.get("kv_device") or _llama_device(llama),
        max_concurrency=found.get("max_concurrency"),
        max_model_len=found.get("max_model_len"),
        cudagraph_estimate_gib=found.get("cudagraph_estimate_gib"),
        cudagraph_actual_gib=found.get("cudagraph_actual_gib"),
        gpu_memory_utilization=found.get("gpu_memory_utilization"),
        total_gib=found.get("total_gib"),
        non_torch_gib=found.get("non_torch_gib"),
        activation_gib=found.get("activation_gib"),
        gpu_blocks=found.get("gpu_blocks"),
        padding_layers=found.get("padding_layers"),
        llamacpp_mib=llama,
    )
