"""Endpoint health via httpx: GET each pod's health path on its host port."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from backend.live.models import EndpointHealth

Target = tuple[str, str]
"""(pod name, URL)."""


def check_all(targets: Iterable[Target], timeout_s: float = 1.5, client_factory: Callable[..., Any] | None = None) -> dict[str, EndpointHealth]:
    """Probe every target once; a refused or slow endpoint is unhealthy, never an exception."""
    import httpx  # lazy: see backend.runtime.readiness

    out: dict[str, EndpointHealth] = {}
    factory = client_factory or httpx.Client
    with factory(timeout=timeout_s) as client:
        for pod, url in targets:
            started = time.monotonic()
            try:
                response = client.get(url)
            except httpx.HTTPError as error:
                out[pod] = EndpointHealth(pod=pod, url=url, healthy=False, checked_at=datetime.now(UTC), error=type(error).__name__)
                continue
            out[pod] = EndpointHealth(
                pod=pod,
                url=url,
                healthy=response.status_code == 200,
                checked_at=datetime.now(UTC),
                status_code=response.status_code,
                latency_ms=round((time.monotonic() - started) * 1000, 1),
            )
    return out
