"""`c3 profile status --json`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class RankStatus(BaseModel):
    """One rank's container on its node."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    node: str
    """The node it runs on."""
    rank: int
    """0 is the head (it serves the endpoint)."""
    state: str
    """The container's state (`running`, `exited`, `absent`, or `error: …` when the node did not answer)."""
    started_at: str | None
    """When the container started (docker's own stamp), if it exists."""


class ProfileStatus(BaseModel):
    """A recipe profile: what it runs, where, and whether its endpoint serves."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    name: str
    """Profile name."""
    recipe: str
    """The recipe it was launched from."""
    status: str
    """`verified recipe`, or `recipe + local overrides` (no verified numbers then)."""
    base_url: str
    """Rank 0's OpenAI base URL."""
    model: str
    """The served model name."""
    overrides: dict[str, Any]
    """`--set` values it was launched with."""
    stopped: bool
    """Deliberately stopped (the watchdog leaves it)."""
    serving: bool
    """Rank 0's endpoint answered."""
    endpoint: str
    """What the endpoint said, or why it did not answer."""
    nodes: list[RankStatus]
    """Each rank's container, rank order."""
