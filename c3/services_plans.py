"""The recipes adapter of the Recipes mode (used by `services_real`); the plans are `backend.actions`'."""

from __future__ import annotations

from c3.services import RecipeRow


def recipes_rows() -> list[RecipeRow] | None:
    """The recipe catalogue (built-ins + `$C3_HOME/recipes.d/`) as rows; None without a recipes backend."""
    try:
        from backend.recipes import load_recipes
    except ImportError:  # a build without NODES' recipes package
        return None
    rows = []
    for recipe in load_recipes().values():
        measured = getattr(recipe, "measured", None)
        numbers: list[str] = []
        if measured is not None:
            labels = (("tokens_per_s", "decode {} tok/s (1 stream)"), ("aggregate_tokens_per_s", "aggregate {} tok/s"), ("concurrency", "at concurrency {}"),
                      ("ttft_ms", "TTFT {} ms"), ("startup_s", "start-up {} s"))
            numbers = [text.format(getattr(measured, key)) for key, text in labels if getattr(measured, key, None) is not None]
        prov = recipe.provenance
        provenance = ""
        if prov is not None:
            provenance = f"{prov.measured_by}" + (f", {prov.measured_on}" if prov.measured_on else "") + f" on {prov.hardware}" + (f" — {prov.source}" if prov.source else "")
        rows.append(
            RecipeRow(
                id=recipe.id,
                hardware=recipe.hardware.description,
                nodes=recipe.nodes,
                image=recipe.image,
                verified=bool(getattr(recipe, "verified", False)),
                summary=recipe.title or f"{recipe.model} ({recipe.engine})",
                provenance=provenance,
                measured=tuple(numbers),
            )
        )
    return rows
