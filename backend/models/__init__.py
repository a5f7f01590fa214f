"""Typed objects shared by every layer (pydantic v2; every field documented).

Re-exported here so callers write `from backend.models import Pod`. The names are loaded on first use
(PEP 562), as in `backend.views`: `c3 pod list` reads the estate's models and `c3 fit` the catalog's,
and neither should build the other's (issue 22).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from backend.models.catalog import CardProfile, CatalogEntry, Engine, ModelSpec, SlugStatus, WeightsVariant
    from backend.models.estate import Estate, Pod
    from backend.models.fit import FitReport, FitVerdict, GpuFit, MaxContext
    from backend.models.gpu import ComputeProcess, Gpu, GpuSnapshot

_WHERE = {
    "CardProfile": "backend.models.catalog",
    "CatalogEntry": "backend.models.catalog",
    "Engine": "backend.models.catalog",
    "ModelSpec": "backend.models.catalog",
    "SlugStatus": "backend.models.catalog",
    "WeightsVariant": "backend.models.catalog",
    "Estate": "backend.models.estate",
    "Pod": "backend.models.estate",
    "FitReport": "backend.models.fit",
    "FitVerdict": "backend.models.fit",
    "GpuFit": "backend.models.fit",
    "MaxContext": "backend.models.fit",
    "ComputeProcess": "backend.models.gpu",
    "Gpu": "backend.models.gpu",
    "GpuSnapshot": "backend.models.gpu",
}

__all__ = [
    "CardProfile",
    "CatalogEntry",
    "ComputeProcess",
    "Engine",
    "Estate",
    "FitReport",
    "FitVerdict",
    "Gpu",
    "GpuFit",
    "GpuSnapshot",
    "MaxContext",
    "ModelSpec",
    "Pod",
    "SlugStatus",
    "WeightsVariant",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(where), name)
    globals()[name] = value  # once loaded, a plain module attribute
    return value
