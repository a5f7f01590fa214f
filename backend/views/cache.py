"""`c3 cache ls`: which model weights each node holds and how big, and what a catalog slug whose model is
not there would download (the cockpit's Nodes screen shows the same reading).

Where a node keeps weights: its Hugging Face hub cache (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else
`~/.cache/huggingface/hub`, resolved on the node — the folder pods mount, backend/runtime/docker_adapter.py)
and the host side of every recipe's `docker.volumes` (e.g. `~/models` for llama.cpp GGUF recipes), plus any
`--path` given. Download sizes are the catalog's weight sizes (`backend/catalog/models/weights.csv`, a copy of
the shared model data whose README, /work/shared/data/models/README.md, cites each row's source).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

MAX_PATHS = 16
"""`--path` folders at most (each is a bounded scan of its own)."""


class CachedModel(BaseModel):
    """One model's weights found on a node."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    name: str
    """HF repo id (`Qwen/Qwen3-8B`) for the hub cache; the folder's or file's name otherwise."""
    kind: str
    """`hf` (a `models--ORG--NAME` repo), `folder` (a folder of weight files) or `file` (one GGUF/safetensors file)."""
    path: str
    """Where it is on that node."""
    bytes: int
    """Its real files' size; a snapshot's links into `blobs/` count once."""
    files: int
    """Files counted."""
    incomplete_bytes: int
    """Of `bytes`, unfinished downloads (`*.incomplete` blobs)."""
    broken_links: int
    """Symlinks that dangle or loop (counted as nothing)."""
    partial: bool
    """The scan was cut inside this model (a bound was reached): `bytes` is a lower bound."""
    revisions: list[str]
    """Snapshot revisions present (hub cache only)."""
    slugs: list[str]
    """Catalog slugs that serve this model."""


class CacheRoot(BaseModel):
    """One folder looked in."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    given: str
    """As asked (`@hf-hub`: the node's Hugging Face hub cache; a recipe volume or `--path` as written)."""
    path: str
    """Resolved on that node."""
    exists: bool
    """The folder is there (a missing one simply holds nothing)."""
    error: str | None
    """Why it could not be read (not a folder, a symlink loop, no permission)."""


class SlugDownload(BaseModel):
    """A catalog slug whose model is not on the node: what serving it there would download."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    slug: str
    """The catalog slug."""
    model: str
    """The HF repo it pulls."""
    bytes: int | None
    """The slug's weights (its variant's size), None when the catalog knows none."""
    source: str
    """Where that size comes from (a weights.csv row and its citation, or an estimate from config.json)."""


class NodeCache(BaseModel):
    """One node's model cache."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    node: str | None
    """Registry name; None for this machine when no node was named."""
    local: bool
    """Read on this machine directly (no SSH)."""
    reachable: bool
    """The node answered (always true for this machine)."""
    error: str | None
    """Why there is no reading (unreachable, no python3 there, the scan failed)."""
    roots: list[CacheRoot]
    """The folders looked in."""
    models: list[CachedModel]
    """What was found, largest first."""
    total_bytes: int
    """All of it, each file once."""
    cut: str | None
    """The bound that ended the scan early (`entries`, `time`, `models`), else None: then sizes are lower bounds."""
    elapsed_s: float
    """How long the scan took on the node."""
    not_cached: list[SlugDownload]
    """Catalog slugs whose model is not there, with their download size."""


def cache_roots(paths: Sequence[str] = ()) -> list[str]:
    """The folders to look in: the HF hub cache, each recipe's mounted host folders, then `paths`."""
    from backend.errors import UsageError
    from backend.nodes.cache_scan import HF_HUB
    from backend.recipes import load_recipes

    if len(paths) > MAX_PATHS:
        raise UsageError(f"at most {MAX_PATHS} --path folders")
    roots = [HF_HUB]
    for recipe in load_recipes().values():
        for volume in recipe.docker.volumes:
            host = volume.split(":", 1)[0]
            if host.startswith(("/", "~")) and host not in roots:
                roots.append(host)
    for path in paths:
        if not path.strip() or "\x00" in path:
            raise UsageError("--path must name a folder")
        if path not in roots:
            roots.append(path)
    return roots


def _downloads(catalog: Any, cached: set[str]) -> list[SlugDownload]:
    from backend.fit.weights import variant_bytes

    rows = []
    for entry in catalog.entries:
        if not entry.model or entry.model.lower() in cached:
            continue
        size, source = variant_bytes(catalog.model_for(entry), entry)
        if entry.weights_bytes:
            size, source = entry.weights_bytes, f"{entry.slug} weights_bytes (catalog.d)"
        rows.append(SlugDownload(slug=entry.slug, model=entry.model, bytes=size, source=source))
    return rows


def node_cache(reading: Any, catalog: Any) -> NodeCache:
    """One `backend.nodes.cache.CacheReading` as the view, matched against the catalog."""
    scan = reading.scan or {}
    by_model: dict[str, list[str]] = {}
    for entry in catalog.entries:
        if entry.model:
            by_model.setdefault(entry.model.lower(), []).append(entry.slug)
    models: list[CachedModel] = []
    for root in scan.get("roots", []):
        for m in root.get("models", []):
            name = str(m.get("name", ""))
            key = name.lower()
            slugs = by_model.get(key, []) if m.get("kind") == "hf" else [
                s for repo, found in by_model.items() if repo.rsplit("/", 1)[-1] == key for s in found]
            models.append(CachedModel(name=name, kind=str(m.get("kind", "")), path=str(m.get("path", "")), bytes=int(m.get("bytes", 0)),
                                      files=int(m.get("files", 0)), incomplete_bytes=int(m.get("incomplete_bytes", 0)),
                                      broken_links=int(m.get("broken_links", 0)), partial=bool(m.get("partial")),
                                      revisions=[str(r) for r in m.get("revisions", [])], slugs=slugs))
    models.sort(key=lambda m: (-m.bytes, m.name))
    roots = [CacheRoot(given=str(r.get("given", "")), path=str(r.get("path", "")), exists=bool(r.get("exists")), error=r.get("error"))
             for r in scan.get("roots", [])]
    held = {m.name.lower() for m in models if m.kind == "hf" and m.bytes > m.incomplete_bytes}
    held |= {repo for repo, slugs in by_model.items() if any(s in m.slugs for m in models if m.kind != "hf" for s in slugs)}
    return NodeCache(node=None if reading.node is None else reading.node, local=reading.local, reachable=reading.reachable,
                     error=reading.error, roots=roots, models=models, total_bytes=int(scan.get("total_bytes", 0)), cut=scan.get("cut"),
                     elapsed_s=float(scan.get("elapsed_s", 0.0)), not_cached=_downloads(catalog, held) if reading.reachable and not reading.error else [])


def cache_listing(names: str | None = None, paths: Sequence[str] = ()) -> list[NodeCache]:
    """This machine's cache (no `names`), or every named registered node's (`a,b`), read concurrently."""
    from backend.catalog import load_catalog
    from backend.nodes.cache import CacheReading, read_caches, scan_here
    from backend.nodes.registry import resolve_nodes
    from backend.remote.fleet import run_sync

    roots = cache_roots(paths)
    catalog = load_catalog()
    if not names:
        return [node_cache(CacheReading(None, True, scan=scan_here(roots)), catalog)]
    readings = run_sync(read_caches(resolve_nodes(names), roots))
    return [node_cache(r, catalog) for r in readings]


def registered_caches() -> list[NodeCache]:
    """Every registered node's cache (the cockpit's Nodes screen), read concurrently; empty without nodes."""
    from backend.nodes.registry import load_registry

    nodes = load_registry().nodes
    return cache_listing(",".join(n.name for n in nodes)) if nodes else []
