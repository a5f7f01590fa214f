"""Is rank 0 answering? One HTTP GET with a short timeout (httpx, imported lazily)."""

from __future__ import annotations


def probe(base_url: str, path: str = "/health", timeout: float = 3.0) -> tuple[bool, str]:
    """(answered 2xx, one-line detail). `base_url` ends in /v1; `path` is from the server root."""
    import httpx

    root = base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url.rstrip("/")
    url = root + path
    try:
        response = httpx.get(url, timeout=timeout, trust_env=False)
    except httpx.TimeoutException:
        return False, f"{url}: timed out after {timeout:.0f}s"
    except httpx.HTTPError as exc:
        return False, f"{url}: {type(exc).__name__}"
    if 200 <= response.status_code < 300:
        return True, f"{url}: HTTP {response.status_code}"
    return False, f"{url}: HTTP {response.status_code}"
