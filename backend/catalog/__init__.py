"""The catalog: built-in slugs (backend/catalog/builtin/*.yaml) merged with `$C3_HOME/catalog.d/*.yaml`.

A user file may add slugs or replace a built-in one (same slug → the user's entry wins, marked
`user: true`). A malformed user file is a usage error naming the file and what is wrong; nothing is
half-loaded.
"""

from __future__ import annotations

import threading
from pathlib import Path

from pydantic import ValidationError

from backend import strict_yaml
from backend.catalog.configs import load_config_file
from backend.catalog.specs import base_model_of, shipped_spec
from backend.errors import Refused, UsageError
from backend.models import CatalogEntry, ModelSpec, WeightsVariant
from backend.paths import user_catalog_dir
from backend.text import show
from backend.userfiles import read_text

BUILTIN_DIR = Path(__file__).with_name("builtin")

__all__ = ["Catalog", "load_catalog", "parse_catalog_file"]


class Catalog:
    """An ordered set of catalog entries with lookups."""

    def __init__(self, entries: list[CatalogEntry], origins: dict[str, Path] | None = None) -> None:
        self.entries = entries
        self._by_slug = {entry.slug.lower(): entry for entry in entries}
        self._origins = origins or {}

    def get(self, slug: str) -> CatalogEntry:
        """The entry for `slug` (case-insensitive); Refused naming close matches when unknown."""
        entry = self._by_slug.get(slug.strip().lower())
        if entry is None:
            tail = slug.strip().lower().split("/")[-1]
            close = [e.slug for e in self.entries if tail and tail in e.slug.lower()][:4]
            hint = f"did you mean {', '.join(close)}?" if close else "`c3 catalog` lists every slug"
            raise Refused(f"unknown slug `{slug}`", hint=hint)
        return entry

    def find(self, slug: str) -> CatalogEntry | None:
        """The entry for `slug`, or None."""
        return self._by_slug.get(slug.strip().lower())

    def model_for(self, entry: CatalogEntry) -> ModelSpec | None:
        """The model spec that prices `entry` (None for custom entries and unknown models)."""
        if entry.config_path:
            path = Path(entry.config_path)
            origin = self._origins.get(entry.slug.lower())
            if not path.is_absolute() and origin is not None:
                path = origin.parent / path
            return _declared_weights(load_config_file(path, repo=entry.base_model or entry.model), entry)
        for repo in (entry.base_model, entry.model):
            if not repo:
                continue
            base = base_model_of(repo)
            spec = shipped_spec(base) if base else None
            if spec is not None:
                return _declared_weights(spec, entry)
        return None


def _declared_weights(spec: ModelSpec, entry: CatalogEntry) -> ModelSpec:
    """`spec` with the entry's own `weights_bytes` as its only weights variant, when it declares one."""
    if not entry.weights_bytes:
        return spec
    variant = WeightsVariant(name=entry.weights or "custom", format="custom", repo=entry.model, bytes=entry.weights_bytes, source=f"{entry.slug} weights_bytes")
    return spec.model_copy(update={"weights": (variant,)})


def parse_catalog_file(path: Path, *, user: bool) -> list[CatalogEntry]:
    """Entries of one YAML file; UsageError naming the file and the problem."""
    text = read_text(path, what="catalog file")
    data = strict_yaml.load(text, source=str(path), what="catalog file", hint="fix the file or move it out of catalog.d")
    if data is None:
        return []
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise UsageError(f"{path}: expected a mapping with an `entries:` list", hint="see DESIGN.md, Catalog: custom entries")
    entries = []
    for number, raw in enumerate(data["entries"], start=1):
        if not isinstance(raw, dict):
            raise UsageError(f"{path}: entry {number} is not a mapping")
        raw = dict(raw, user=user)
        for key in ("command", "extra_args"):
            if isinstance(raw.get(key), list):
                raw[key] = tuple(str(part) for part in raw[key])
        try:
            entry = CatalogEntry.model_validate(raw)
        except ValidationError as error:
            first = error.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "entry"
            raise UsageError(f"{path}: entry {number} ({show(raw.get('slug', 'no slug'))}): {show(field, 60)}: {show(first['msg'], 120)}") from None
        prefix, _, name = entry.slug.partition("/")
        if not name or prefix != entry.engine:
            raise UsageError(f"{path}: entry {number}: slug `{entry.slug}` must be `{entry.engine}/<name>`")
        if entry.engine == "custom" and (not entry.image or entry.container_port is None):
            raise UsageError(f"{path}: entry {number} ({entry.slug}): a custom entry needs image and container_port (and usually command)")
        entries.append(entry)
    return entries


# The last catalog built per user folder, with the stamp (path, inode, mtime, size) of every file it
# was read from: the TUI, `c3 catalog --fits-on` and estate validation ask for it once per slug/pod.
_cache: dict[Path, tuple[tuple[tuple[str, int, int, int], ...], Catalog]] = {}
_cache_lock = threading.Lock()


def _catalog_files(folder: Path) -> list[tuple[Path, bool]]:
    files = [(path, False) for path in sorted(BUILTIN_DIR.glob("*.yaml"))]
    if folder.is_dir():
        files += [(path, True) for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")])]
    return files


def _stamp(files: list[tuple[Path, bool]]) -> tuple[tuple[str, int, int, int], ...] | None:
    stamps = []
    for path, _ in files:
        try:
            st = path.stat()
        except OSError:
            return None  # parse_catalog_file reports it
        stamps.append((str(path), st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(stamps)


def load_catalog(user_dir: Path | None = None) -> Catalog:
    """Built-in entries with `$C3_HOME/catalog.d/*.yaml` merged over them (same slug replaces).

    Re-read only when a file was added, removed or changed since the last call for the same folder.
    """
    folder = user_dir if user_dir is not None else user_catalog_dir()
    files = _catalog_files(folder)
    stamp = _stamp(files)
    key = folder.absolute()
    with _cache_lock:
        cached = _cache.get(key)
    if stamp is not None and cached is not None and cached[0] == stamp:
        return Catalog(list(cached[1].entries), dict(cached[1]._origins))
    merged: dict[str, CatalogEntry] = {}
    origins: dict[str, Path] = {}
    for path, user in files:
        for entry in parse_catalog_file(path, user=user):
            merged[entry.slug.lower()] = entry
            origins[entry.slug.lower()] = path
    catalog = Catalog(list(merged.values()), origins)
    if stamp is not None:
        with _cache_lock:
            _cache[key] = (stamp, Catalog(list(catalog.entries), dict(origins)))
    return catalog
