"""Which path says a pod serves: one rule, read by the writes (`backend.actions.workspace`) and by
the status views alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from backend.errors import C3Error

if TYPE_CHECKING:
    from backend.models import Pod

DEFAULT_HEALTH_PATH = "/v1/models"
"""What a pod whose catalog entry cannot be read is asked (every OpenAI server answers it)."""


def health_path(catalog: Callable[[], Any], pod: Pod) -> str:
    """The path that says a pod serves: its catalog entry's, else `/v1/models`. `catalog` is a
    callable returning the catalog (so a broken catalog costs this pod only its own entry)."""
    try:
        return str(catalog().get(pod.slug).health_path)
    except (C3Error, ImportError):
        return DEFAULT_HEALTH_PATH
