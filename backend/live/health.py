"""Endpoint health: GET each pod's health path on its host port (backend.http_probe's policy)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from backend import http_probe
from backend.live.models import EndpointHealth

Target = tuple[str, str]
"""(pod name, URL)."""


def check_all(targets: Iterable[Target], timeout_s: float = 1.5, client_factory: Callable[..., Any] | None = None,
              client: Any | None = None) -> dict[str, EndpointHealth]:
    """Probe every target once; a refused or slow endpoint is unhealthy, never an exception. `client`:
    a probe client to reuse (the live hub keeps one: building a client builds an SSL context, ~5 ms of
    CPU, which every 2 s was most of an idle cockpit's CPU); else one is made for this call."""
    if client is not None:
        return _check(client, targets)
    factory = client_factory or http_probe.client
    with factory(timeout_s) as made:
        return _check(made, targets)


def _check(client: Any, targets: Iterable[Target]) -> dict[str, EndpointHealth]:
    return {pod: probe(client, pod, url) for pod, url in targets}


def probe(client: Any, pod: str, url: str) -> EndpointHealth:
    """GET one health URL with a probe client: healthy on HTTP 200; refused, slow or any other status is not."""
    result = http_probe.fetch(client, url, max_bytes=64 * 1024)
    if not result.answered:
        return EndpointHealth(pod=pod, url=url, healthy=False, checked_at=datetime.now(UTC), error=result.error, timed_out=result.timed_out)
    return EndpointHealth(pod=pod, url=url, healthy=result.status == 200, checked_at=datetime.now(UTC),
                          status_code=result.status, latency_ms=result.elapsed_ms)
