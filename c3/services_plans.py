"""The recipes adapter of the Recipes mode (used by `services_real`); the plans are `backend.actions`'."""

from __future__ import annotations

from c3.services import RecipeRow


def recipes_rows() -> list[RecipeRow] | None:
    """The recipe catalogue (built-ins + `$C3_HOME/recipes.d/`) as rows; None without a recipes backend."""
    try:
        from backend.views.recipes import recipe_cards
    except ImportError:  # a build without NODES' recipes package
        return None
    return [RecipeRow(id=c.id, hardware=c.hardware, nodes=c.nodes, image=c.image, verified=c.verified, summary=c.title,
                      provenance=c.provenance, measured=tuple(c.measured)) for c in recipe_cards()]
