"""Endpoint health via httpx: GET each pod's health path on its host port."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from backend.live.models import EndpointHealth

Target = tuple[str, str]
"""(pod name, URL)."""


def check_all(targets: Iterable[Target], timeout_s: float = 1.5, client_factory: Callable[..., object] | None = None,
              client: object | None = None) -> dict[str, EndpointHealth]:
    """Probe every target once; a refused or slow endpoint is unhealthy, never an exception. `client`:
    an httpx client to reuse (the live hub keeps one: building a client builds an SSL context, ~5 ms of
    CPU, which every 2 s was most of an idle cockpit's CPU); else one is made for this call."""
    import httpx  # lazy: see backend.runtime.readiness

    if client is not None:
        return _check(client, targets)
    factory = client_factory or httpx.Client
    with factory(timeout=timeout_s) as made:  # type: ignore[operator]
        return _check(made, targets)


def _check(client: object, targets: Iterable[Target]) -> dict[str, EndpointHealth]:
    import httpx

    out: dict[str, EndpointHealth] = {}
    for pod, url in targets:
        started = time.monotonic()
        try:
            response = client.get(url)  # type: ignore[attr-defined]
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
