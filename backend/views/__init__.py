"""Typed views of what c3 runs: their `model_dump(mode="json")` IS the documented `--json` contract
(docs/DESIGN.md, "JSON shapes that scripts rely on"); front ends render them, nothing re-parses dicts."""

from backend.views.pods import PodStatus

__all__ = ["PodStatus"]
