"""Engine metrics as one line of plain text, shared by the cockpit's pod view and `c3 pod status`.

Unknown is shown as `–`, never as 0: llama-server exports no KV use, TTFT or preemptions, and a rate
needs two scrapes. Compact (the 80-column pod view) keeps what an operator glances at: load, KV,
prefix-cache hit rate, generation speed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from backend.live.engine_metrics import EngineMetrics
    from backend.runtime.models import ResourceUse
    from backend.views.try_pod import TryResult
    from c3.services import PodState

DASH = "–"
Form = Literal["narrow", "medium", "wide"]


def num(value: float | None, unit: str = "") -> str:
    """`12`, `3.4`, `1.2k`, or `–` when unknown."""
    if value is None:
        return DASH
    if abs(value) >= 10_000:
        return f"{value / 1000:.0f}k{unit}"
    if abs(value) >= 1000:
        return f"{value / 1000:.1f}k{unit}"
    return f"{value:.0f}{unit}" if value == int(value) or abs(value) >= 100 else f"{value:.1f}{unit}"


def metrics_line(m: EngineMetrics, *, form: Form = "medium") -> str:
    """narrow: `r2 w1 · KV 34% · hit 55% · 48 t/s`; medium: `req 2 run 1 wait · KV 34% · hit 55% · gen
    48 tok/s`; wide adds prompt tok/s, TTFT p50 and preemptions."""
    if form == "narrow":
        return f"r{num(m.running)} w{num(m.waiting)} · KV {num(m.kv_cache_pct, '%')} · hit {num(m.prefix_hit_pct, '%')} · {num(m.generation_tps)} t/s"
    parts = [f"req {num(m.running)} run {num(m.waiting)} wait", f"KV {num(m.kv_cache_pct, '%')}",
             f"hit {num(m.prefix_hit_pct, '%')}", f"gen {num(m.generation_tps)} tok/s"]
    if form == "wide":
        parts += [f"prompt {num(m.prompt_tps)} tok/s", f"TTFT p50 {num(m.ttft_p50_ms, ' ms')}", f"preempted {num(m.preemptions)}"]
    return " · ".join(parts)


def usage_text(use: ResourceUse) -> str:
    """`CPU 12.3% · RAM 1.2 GiB` (`/ 4.0 GiB` when the workload has a memory limit), as `docker stats` reads."""
    ram = _bytes(use.mem_bytes) + (f" / {_bytes(use.mem_limit_bytes)}" if use.mem_limit_bytes else "")
    return f"CPU {num(use.cpu_pct, '%')} · RAM {ram}"


def _bytes(value: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value / 1024:.0f} KiB"


def metrics_facts(state: PodState) -> list[tuple[str, str]]:
    """The details' engine-metrics rows; what the engine does not export says so."""
    m = state.metrics
    if m is None:
        return [("engine metrics", state.metrics_error or ("none yet" if state.state == "serving" else "the pod is not serving"))]
    missing = f"not exported by {'llama-server' if m.engine == 'llamacpp' else m.engine}"
    stale = [("engine metrics", f"as of {m.taken_at.astimezone():%H:%M:%S}; the last scrape failed: {state.metrics_error}")] if state.metrics_error else []
    return [*stale,
        ("requests", f"{num(m.running)} running, {num(m.waiting)} waiting"),
        ("KV cache", f"{num(m.kv_cache_pct, '%')} in use" if m.kv_cache_pct is not None else missing),
        ("prefix-cache hit", f"{num(m.prefix_hit_pct, '%')} of prompt tokens" if m.prefix_hit_pct is not None else "no prompts yet"),
        ("tokens/s", f"prompt {num(m.prompt_tps)}, generation {num(m.generation_tps)}"),
        ("tokens so far", f"prompt {num(m.prompt_tokens_total)}, generated {num(m.generation_tokens_total)}"),
        ("TTFT p50", f"{num(m.ttft_p50_ms, ' ms')}" if m.ttft_p50_ms is not None else (missing if m.engine == "llamacpp" else "no requests yet")),
        ("preemptions", num(m.preemptions) if m.preemptions is not None else missing),
    ]


def try_numbers(result: TryResult) -> str:
    """A test prompt's numbers, `TTFT 84 ms · 16 tokens · 412.5 tok/s` (`c3 pod try` and the cockpit's `t`)."""
    return f"TTFT {result.ttft_ms:.0f} ms · {result.tokens} tokens · {result.tokens_per_s:.1f} tok/s"
