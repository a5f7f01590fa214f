"""Engine metrics from a serving pod's Prometheus `/metrics`: vLLM's `vllm:` names and llama-server's
`llamacpp:` names, as the real engines expose them (recorded in tests/fixtures/engines/).

`parse(text)` turns one scrape into an `EngineSample` (gauges, cumulative counters, the TTFT
histogram); `derive(previous, current)` turns two samples into the `EngineMetrics` an operator reads:
rates need two scrapes, so with one sample they are None, never a made-up zero. The text itself is
parsed by `prometheus_client` (the reference parser), not by hand.

What each engine has (and what it has not — then the field is None, not 0):
- vLLM: requests running/waiting, `kv_cache_usage_perc` (a 0–1 fraction despite the name), prefix-cache
  queries/hits (in tokens), prompt/generation token counters, the TTFT histogram, preemptions.
- llama-server (`--metrics`): `requests_processing`/`requests_deferred`, prompt tokens processed
  (excluding cached ones) and `prompt_tokens_cached_total`, `tokens_predicted_total`. It exports no
  KV-cache usage, no TTFT histogram and no preemption count.
"""

from __future__ import annotations

import functools
import math
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from backend.errors import C3Error

Engine = Literal["vllm", "llamacpp"]

MAX_BYTES = 4 * 1024 * 1024
"""A /metrics body larger than this is refused (vLLM's is ~60 KB; llama-server's ~2 KB)."""


class EngineMetricsError(C3Error):
    """The body is not Prometheus text, or carries neither engine's names."""


class EngineSample(BaseModel):
    """One scrape of an engine's /metrics, summed over its engine/model label sets (data-parallel ranks)."""

    model_config = ConfigDict(frozen=True)

    engine: Engine
    """Which name set was found."""
    taken_at: datetime
    """When the scrape was read (UTC)."""
    clock: float
    """time.monotonic() at the scrape: rates divide by this, not by wall time."""
    running: int | None = None
    """Requests in the running batch."""
    waiting: int | None = None
    """Requests queued (vLLM waiting; llama-server deferred)."""
    kv_cache_fraction: float | None = None
    """KV-cache blocks in use, 0–1 (vLLM only; mean over ranks)."""
    prefix_queries: float | None = None
    """Prompt tokens looked up in the prefix cache (counter; llama-server: processed + cached)."""
    prefix_hits: float | None = None
    """Prompt tokens found in the prefix cache (counter)."""
    prompt_tokens: float | None = None
    """Prompt tokens admitted, cached ones included (counter)."""
    generation_tokens: float | None = None
    """Tokens generated (counter)."""
    preemptions: float | None = None
    """Requests preempted so far (counter; vLLM only)."""
    ttft_buckets: tuple[tuple[float, float], ...] = ()
    """TTFT histogram: (upper bound in s, cumulative count), ascending, +Inf last (vLLM only)."""


class EngineMetrics(BaseModel):
    """What the cockpit and `c3 pod status --json` show for one serving pod."""

    model_config = ConfigDict(frozen=True)

    engine: Engine
    """vllm | llamacpp: which /metrics names the pod serves."""
    taken_at: datetime
    """When the latest scrape was sent (UTC)."""
    scrape_ms: float | None = None
    """How long the engine took to answer it: the numbers are the engine's at some moment between
    `taken_at` and `taken_at` + this (a busy engine answers late)."""
    running: int | None = None
    """Requests running now."""
    waiting: int | None = None
    """Requests waiting now."""
    kv_cache_pct: float | None = None
    """KV-cache use now, percent (None: the engine does not export it)."""
    prefix_hit_pct: float | None = None
    """Prefix-cache hit rate, percent of prompt tokens: over the last interval when prompts arrived
    in it, else since the engine started; None before any prompt."""
    prompt_tps: float | None = None
    """Prompt tokens per second over the last interval (None with one scrape)."""
    generation_tps: float | None = None
    """Generated tokens per second over the last interval (None with one scrape)."""
    ttft_p50_ms: float | None = None
    """Median time to first token, ms, interpolated in the histogram's buckets: over the last interval
    when requests finished prefill in it, else since start; None without the histogram or requests."""
    preemptions: int | None = None
    """Preemptions since the engine started."""
    new_preemptions: int = 0
    """Preemptions during the last interval (a pod that is preempting now is in trouble)."""
    prompt_tokens_total: int | None = None
    """Prompt tokens since start (cached included)."""
    generation_tokens_total: int | None = None
    """Generated tokens since start."""


class PodMetrics(BaseModel):
    """One serving pod's last /metrics scrape: the derived metrics, or why there are none."""

    model_config = ConfigDict(frozen=True)

    pod: str
    """Pod name."""
    metrics: EngineMetrics | None = None
    """What the engine reported (rates need the scrape before it)."""
    error: str | None = None
    """Why the last scrape failed (HTTP status, timeout, not an engine's metrics). In the live hub a
    failed scrape keeps the numbers of the last one that answered (`metrics`, up to 30 s old: its
    `taken_at` says when); elsewhere `metrics` is None with an error."""

    def row(self) -> dict[str, Any]:
        """The `metrics` and `metrics_error` fields of a `c3 pod status --json` row."""
        return {"metrics": self.metrics.model_dump(mode="json") if self.metrics else None, "metrics_error": self.error}


WANTED = frozenset({
    "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:num_preemptions_total",
    "vllm:time_to_first_token_seconds_bucket", "llamacpp:requests_processing", "llamacpp:requests_deferred",
    "llamacpp:prompt_tokens_total", "llamacpp:prompt_tokens_cached_total", "llamacpp:tokens_predicted_total",
})
"""The samples read. Only their lines are handed to the parser: vLLM's body is ~50 KB of which these
are ~40 lines, and parsing all of it costs ~6 ms a scrape (16 pods every 2 s: 5 % of a core)."""


def _wanted(line: str) -> bool:
    if not line.startswith(("vllm:", "llamacpp:")):
        return False
    end = min((i for i in (line.find("{"), line.find(" ")) if i >= 0), default=len(line))
    return line[:end] in WANTED


def _family(name: str) -> tuple[Engine, str] | None:
    for engine in ("vllm", "llamacpp"):
        prefix = engine + ":"
        if name.startswith(prefix):
            return engine, name[len(prefix):]
    return None


def parse(text: str, *, taken_at: datetime, clock: float) -> EngineSample:
    """One /metrics body → an `EngineSample`; `EngineMetricsError` when it is not an engine's metrics."""
    if len(text) > MAX_BYTES:
        raise EngineMetricsError(f"/metrics body is {len(text)} bytes (over {MAX_BYTES})")
    wanted = "".join(line for line in text.splitlines(keepends=True) if _wanted(line))
    engines, sums, counts, buckets = _read(wanted)
    return _sample(engines, dict(sums), dict(counts), dict(buckets), taken_at=taken_at, clock=clock)


@functools.lru_cache(maxsize=64)
def _read(text: str) -> tuple[frozenset[str], tuple[tuple[str, float], ...], tuple[tuple[str, int], ...], tuple[tuple[float, float], ...]]:
    """The wanted lines of one body, summed per name. Cached on those lines: an engine with nothing to
    do serves the same numbers scrape after scrape, and the parser is most of a scrape's CPU."""
    from prometheus_client.parser import text_string_to_metric_families

    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    buckets: dict[float, float] = {}
    engines: set[str] = set()
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                found = _family(sample.name)
                if found is None or not math.isfinite(sample.value) and not sample.name.endswith("_bucket"):
                    continue
                engine, name = found
                engines.add(engine)
                if name == "time_to_first_token_seconds_bucket":
                    bound = float(sample.labels.get("le", "nan"))
                    buckets[bound] = buckets.get(bound, 0.0) + sample.value
                    continue
                if name.endswith("_by_reason") or name.endswith("_by_source_total"):
                    continue  # breakdowns of totals read below: summing them too would double count
                sums[name] = sums.get(name, 0.0) + sample.value
                counts[name] = counts.get(name, 0) + 1
    except ValueError as error:  # prometheus_client's parse error
        raise EngineMetricsError(f"/metrics is not Prometheus text: {str(error).splitlines()[0][:120] if str(error) else 'unparsable'}") from None
    if not engines:
        raise EngineMetricsError("/metrics has no vllm: or llamacpp: names",
                                 hint="llama-server exports them only with --metrics")
    return frozenset(engines), tuple(sums.items()), tuple(counts.items()), tuple(buckets.items())


def _sample(engines: frozenset[str], sums: dict[str, float], counts: dict[str, int], buckets: dict[float, float], *,
            taken_at: datetime, clock: float) -> EngineSample:
    def total(name: str) -> float | None:
        return sums.get(name)

    def whole(name: str) -> int | None:
        value = sums.get(name)
        return None if value is None else int(value)

    if "vllm" in engines:
        kv = sums.get("kv_cache_usage_perc")
        return EngineSample(
            engine="vllm", taken_at=taken_at, clock=clock,
            running=whole("num_requests_running"), waiting=whole("num_requests_waiting"),
            kv_cache_fraction=None if kv is None else kv / counts["kv_cache_usage_perc"],
            prefix_queries=total("prefix_cache_queries_total"), prefix_hits=total("prefix_cache_hits_total"),
            prompt_tokens=total("prompt_tokens_total"), generation_tokens=total("generation_tokens_total"),
            preemptions=total("num_preemptions_total"),
            ttft_buckets=tuple(sorted((b, c) for b, c in buckets.items() if not math.isnan(b))),
        )
    processed, cached = total("prompt_tokens_total"), total("prompt_tokens_cached_total")
    admitted = None if processed is None else processed + (cached or 0.0)
    return EngineSample(
        engine="llamacpp", taken_at=taken_at, clock=clock,
        running=whole("requests_processing"), waiting=whole("requests_deferred"),
        prefix_queries=admitted if cached is not None else None, prefix_hits=cached,
        prompt_tokens=admitted, generation_tokens=total("tokens_predicted_total"),
    )


def histogram_p50(buckets: tuple[tuple[float, float], ...]) -> float | None:
    """The median of a cumulative histogram, linearly interpolated inside its bucket (as Prometheus'
    histogram_quantile does); None when empty. A median in the +Inf bucket reads as the last finite bound."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = buckets[-1][1] / 2
    lower, below = 0.0, 0.0
    for bound, cumulative in buckets:
        if cumulative >= rank:
            if math.isinf(bound):
                return lower
            if cumulative == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (cumulative - below)
        lower, below = bound, cumulative
    return lower


def _delta(current: float | None, previous: float | None) -> float | None:
    """A counter's growth; None when unknown or when it went down (the engine restarted)."""
    if current is None or previous is None or current < previous:
        return None
    return current - previous


def _pct(part: float | None, whole: float | None) -> float | None:
    return None if part is None or not whole else round(100.0 * part / whole, 1)


def derive(current: EngineSample, previous: EngineSample | None = None) -> EngineMetrics:
    """The operator's view from the latest scrape and (for rates) the one before it."""
    if previous is not None and (previous.engine != current.engine or current.clock <= previous.clock):
        previous = None
    span = current.clock - previous.clock if previous is not None else 0.0

    def rate(name: str) -> float | None:
        if previous is None:
            return None
        grew = _delta(getattr(current, name), getattr(previous, name))
        return None if grew is None else round(grew / span, 1)

    hit = _pct(current.prefix_hits, current.prefix_queries)
    ttft_buckets = current.ttft_buckets
    if previous is not None:
        queries = _delta(current.prefix_queries, previous.prefix_queries)
        if queries:  # prompts arrived in this interval: the recent hit rate is what matters now
            hit = _pct(_delta(current.prefix_hits, previous.prefix_hits), queries)
        if previous.ttft_buckets and [b for b, _ in previous.ttft_buckets] == [b for b, _ in ttft_buckets]:
            recent = tuple((b, c - p) for (b, c), (_, p) in zip(ttft_buckets, previous.ttft_buckets, strict=True))
            if recent and recent[-1][1] > 0 and all(c >= 0 for _, c in recent):
                ttft_buckets = recent
    p50 = histogram_p50(ttft_buckets)
    grew = _delta(current.preemptions, previous.preemptions) if previous is not None else None
    return EngineMetrics(
        engine=current.engine, taken_at=current.taken_at, running=current.running, waiting=current.waiting,
        kv_cache_pct=None if current.kv_cache_fraction is None else round(100.0 * current.kv_cache_fraction, 1),
        prefix_hit_pct=hit, prompt_tps=rate("prompt_tokens"), generation_tps=rate("generation_tokens"),
        ttft_p50_ms=None if p50 is None else round(p50 * 1000, 1),
        preemptions=None if current.preemptions is None else int(current.preemptions), new_preemptions=int(grew or 0),
        prompt_tokens_total=None if current.prompt_tokens is None else int(current.prompt_tokens),
        generation_tokens_total=None if current.generation_tokens is None else int(current.generation_tokens),
    )


def scrape(client: object, url: str, *, clock: float, taken_at: datetime) -> EngineSample:
    """GET one /metrics with a client from backend.http_probe (its timeout bounds the wait), reading at most MAX_BYTES."""
    from backend.http_probe import fetch

    answer = fetch(client, url, max_bytes=MAX_BYTES)
    if not answer.answered:
        raise EngineMetricsError(f"{url}: {answer.error}")
    if answer.status != 200:
        hint = "llama-server serves /metrics only with --metrics" if answer.status in (404, 501) else None
        raise EngineMetricsError(f"{url} answered HTTP {answer.status}", hint=hint)
    if answer.truncated:
        raise EngineMetricsError(f"{url} sent more than {MAX_BYTES} bytes")
    return parse(answer.body.decode("utf-8", "replace"), taken_at=taken_at, clock=clock)


def read_pod(client: object, pod: str, port: int, previous: EngineSample | None = None) -> tuple[PodMetrics, EngineSample | None]:
    """Scrape one pod on loopback: its metrics (or why none) and the sample to keep for the next rates."""
    import time
    from datetime import UTC

    started = time.monotonic()
    try:
        sample = scrape(client, f"http://127.0.0.1:{port}/metrics", clock=started, taken_at=datetime.now(UTC))
    except EngineMetricsError as error:
        return PodMetrics(pod=pod, error=error.message), None
    took = round((time.monotonic() - started) * 1000, 1)
    return PodMetrics(pod=pod, metrics=derive(sample, previous).model_copy(update={"scrape_ms": took})), sample
