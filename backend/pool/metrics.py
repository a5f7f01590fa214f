"""Router counters and their Prometheus text rendering (`GET /metrics` on the router).

Plain integer attributes and a fixed-bucket histogram: the hot path pays one bisect and a few
additions per request. Latency is time to the backend's response head (what a client waits before the
first byte), measured from the moment the router picked a backend.
"""

from __future__ import annotations

import bisect
from collections import deque

BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class BackendMetrics:
    """Counters for one backend."""

    __slots__ = ("requests", "errors", "retries", "repins", "in_flight", "buckets", "latency_sum", "latency_count", "recent", "keys", "stalls")

    def __init__(self, key_window: int = 200) -> None:
        self.requests = 0
        self.errors = 0
        self.retries = 0
        self.repins = 0
        self.in_flight = 0
        self.stalls = 0  # responses cut because the backend sent no bytes for --stream-timeout
        self.buckets = [0] * (len(BUCKETS_S) + 1)
        self.latency_sum = 0.0
        self.latency_count = 0
        self.recent: deque[float] = deque(maxlen=2048)
        self.keys: deque[str | None] = deque(maxlen=key_window)  # hashed sticky key per recent request (hot keys)

    def observe(self, seconds: float) -> None:
        """Record one time-to-response-head."""
        self.buckets[bisect.bisect_left(BUCKETS_S, seconds)] += 1
        self.latency_sum += seconds
        self.latency_count += 1
        self.recent.append(seconds)

    def percentile_ms(self, q: float) -> float | None:
        """A percentile over the last 2,048 requests, in milliseconds."""
        if not self.recent:
            return None
        ordered = sorted(self.recent)
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000.0, 3)


class PoolMetrics:
    """Counters for the whole router."""

    def __init__(self, names: list[str], key_window: int = 200) -> None:
        self.backends = {name: BackendMetrics(key_window) for name in names}
        self.sticky = {"hit": 0, "miss": 0, "repin": 0, "none": 0}
        self.no_backend = 0
        self.client_disconnects = 0
        self.midstream_failures = 0

    def hit_ratio(self) -> float | None:
        """Hits over keyed requests (hit + miss + repin); None before any keyed request."""
        keyed = self.sticky["hit"] + self.sticky["miss"] + self.sticky["repin"]
        return self.sticky["hit"] / keyed if keyed else None

    def render(self, states: dict[str, tuple[str, bool]], pins: dict[str, int]) -> str:
        """Prometheus text exposition (format 0.0.4). `states` maps name → (url, routable)."""
        out: list[str] = []

        def family(name: str, kind: str, help_text: str) -> None:
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")

        def lbl(name: str) -> str:
            url = states.get(name, ("", False))[0].replace("\\", "\\\\").replace('"', '\\"')
            return f'backend="{name}",url="{url}"'

        simple = (
            ("c3_pool_requests_total", "counter", "Requests answered by the backend (any status).", "requests"),
            ("c3_pool_errors_total", "counter", "Connect failures, 5xx answers and broken streams.", "errors"),
            ("c3_pool_retries_total", "counter", "Requests retried elsewhere after this backend failed before the first byte.", "retries"),
            ("c3_pool_repins_total", "counter", "Sessions moved to this backend because their pinned backend was not routable.", "repins"),
            ("c3_pool_in_flight", "gauge", "Requests in progress on the backend.", "in_flight"),
            ("c3_pool_stalled_streams_total", "counter", "Responses cut because the backend stalled mid-body (--stream-timeout).", "stalls"),
        )
        for metric, kind, help_text, attr in simple:
            family(metric, kind, help_text)
            for name, m in self.backends.items():
                out.append(f"{metric}{{{lbl(name)}}} {getattr(m, attr)}")
        family("c3_pool_backend_up", "gauge", "1 when the backend is routable.")
        for name in self.backends:
            out.append(f"c3_pool_backend_up{{{lbl(name)}}} {1 if states.get(name, ('', False))[1] else 0}")
        family("c3_pool_pins", "gauge", "Sessions pinned to the backend.")
        for name in self.backends:
            out.append(f"c3_pool_pins{{{lbl(name)}}} {max(0, pins.get(name, 0))}")
        family("c3_pool_latency_seconds", "histogram", "Time from backend choice to the backend's response head.")
        for name, m in self.backends.items():
            cumulative = 0
            for bound, count in zip(BUCKETS_S, m.buckets, strict=False):
                cumulative += count
                out.append(f'c3_pool_latency_seconds_bucket{{{lbl(name)},le="{bound}"}} {cumulative}')
            out.append(f'c3_pool_latency_seconds_bucket{{{lbl(name)},le="+Inf"}} {m.latency_count}')
            out.append(f"c3_pool_latency_seconds_sum{{{lbl(name)}}} {m.latency_sum:.6f}")
            out.append(f"c3_pool_latency_seconds_count{{{lbl(name)}}} {m.latency_count}")
        family("c3_pool_sticky_total", "counter", "Routing decisions by sticky outcome (hit, miss, repin, none).")
        for outcome, count in self.sticky.items():
            out.append(f'c3_pool_sticky_total{{outcome="{outcome}"}} {count}')
        ratio = self.hit_ratio()
        family("c3_pool_sticky_hit_ratio", "gauge", "Sticky hits over keyed requests (NaN before any).")
        out.append(f"c3_pool_sticky_hit_ratio {'NaN' if ratio is None else f'{ratio:.6f}'}")
        family("c3_pool_no_backend_total", "counter", "Requests refused because no backend was routable.")
        out.append(f"c3_pool_no_backend_total {self.no_backend}")
        family("c3_pool_client_disconnects_total", "counter", "Clients that went away mid-request (backend request closed).")
        out.append(f"c3_pool_client_disconnects_total {self.client_disconnects}")
        family("c3_pool_midstream_failures_total", "counter", "Responses cut off by a backend after the first byte.")
        out.append(f"c3_pool_midstream_failures_total {self.midstream_failures}")
        return "\n".join(out) + "\n"
