"""Is rank 0 answering? One GET through backend.http_probe (its proxy policy, timeout, bounded body)."""

from __future__ import annotations

from backend.http_probe import probe as http_probe


def probe(base_url: str, path: str = "/health", timeout: float = 3.0) -> tuple[bool, str]:
    """(answered 2xx, one-line detail). `base_url` ends in /v1; `path` is from the server root."""
    root = base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url.rstrip("/")
    url = root + path
    result = http_probe(url, timeout=timeout, max_bytes=64 * 1024)
    return result.ok, result.line()
