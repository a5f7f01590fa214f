"""Typed objects shared by every layer (pydantic v2; every field documented).

Re-exported here so callers write `from backend.models import Pod`.
"""

from backend.models.catalog import CardProfile, CatalogEntry, Engine, ModelSpec, SlugStatus, WeightsVariant
from backend.models.estate import Estate, Pod
from backend.models.fit import FitReport, FitVerdict, GpuFit
from backend.models.gpu import ComputeProcess, Gpu, GpuSnapshot

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
    "ModelSpec",
    "Pod",
    "SlugStatus",
    "WeightsVariant",
]
