"""The shipped model specs: the real config.json files under models/ plus weights.csv sizes."""

from __future__ import annotations

import csv
from functools import lru_cache
from pathlib import Path

from backend.catalog.configs import load_config_file, with_weights
from backend.models import ModelSpec, WeightsVariant

MODELS_DIR = Path(__file__).with_name("models")


def config_file_for(repo: str) -> Path:
    """`org/name` → models/org__name.config.json."""
    return MODELS_DIR / (repo.replace("/", "__") + ".config.json")


@lru_cache(maxsize=1)
def _weights_rows() -> tuple[dict[str, str], ...]:
    with (MODELS_DIR / "weights.csv").open(newline="", encoding="utf-8") as handle:
        return tuple(csv.DictReader(handle))


def weight_variants(repo: str) -> tuple[WeightsVariant, ...]:
    """Every weights.csv row for a base model, first row per variant name."""
    seen: dict[str, WeightsVariant] = {}
    for row in _weights_rows():
        if row["model"] != repo or row["variant"] in seen:
            continue
        seen[row["variant"]] = WeightsVariant(
            name=row["variant"],
            format=row["variant"].split("-")[0],
            repo=row["repo"],
            bytes=int(row["total_bytes"]),
            source=row["source"] + (f" ({row['note']})" if row.get("note") else ""),
        )
    return tuple(seen.values())


def base_model_of(repo: str) -> str | None:
    """The base model a derivative repo (e.g. `Qwen/Qwen3-8B-AWQ`) belongs to, via weights.csv."""
    if config_file_for(repo).exists():
        return repo
    for row in _weights_rows():
        if row["repo"] == repo:
            return row["model"]
    return None


@lru_cache(maxsize=64)
def shipped_spec(repo: str) -> ModelSpec | None:
    """The spec of a shipped base model, with its weight variants; None when not shipped."""
    path = config_file_for(repo)
    if not path.exists():
        return None
    spec = load_config_file(path, repo=repo)
    return with_weights(spec.model_copy(update={"source": f"backend/catalog/models/{path.name} (see shared data README)"}), weight_variants(repo))


def shipped_repos() -> list[str]:
    """Every base model with a shipped config.json."""
    return sorted(p.name.removesuffix(".config.json").replace("__", "/", 1) for p in MODELS_DIR.glob("*.config.json"))
