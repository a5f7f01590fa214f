"""`c3 recipes list|show` and the Recipes mode: the recipe catalogue (built-ins + `$C3_HOME/recipes.d/`)
as typed views, and the as-typed check of a launch's `--set` entries."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from backend.errors import C3Error
from backend.recipes.schema import Recipe


class RecipeSummary(BaseModel):
    """One row of `c3 recipes list --json`."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    id: str
    """Recipe id (`c3 recipes launch ID`)."""
    hardware: str
    """The hardware it was measured on, in words."""
    hardware_id: str
    """That hardware's id (what known-abort rules name)."""
    nodes: int
    """How many nodes it spans."""
    image: str
    """The container image (pinned by digest when verified)."""
    verified: bool
    """Its numbers were measured on that hardware (else they are somebody's expectation)."""
    model: str
    """The model it serves."""
    engine: str
    """The engine (`vllm`, …)."""


class RecipeCard(RecipeSummary):
    """A recipe as the Recipes mode shows it: the summary plus its provenance and numbers, in words."""

    title: str
    """One line saying what it is (the model and engine when the recipe has no title)."""
    provenance: str
    """Who measured it, when and on what, and where the source is ("" when unknown)."""
    measured: list[str]
    """Its measured numbers, one phrase each (`decode 41.5 tok/s (1 stream)`, `TTFT 120 ms`, …)."""


_NUMBERS = (("tokens_per_s", "decode {} tok/s (1 stream)"), ("aggregate_tokens_per_s", "aggregate {} tok/s"), ("concurrency", "at concurrency {}"),
            ("ttft_ms", "TTFT {} ms"), ("startup_s", "start-up {} s"))


def _summary(r: Recipe) -> dict[str, object]:
    return {"id": r.id, "hardware": r.hardware.description, "hardware_id": r.hardware.id, "nodes": r.nodes, "image": r.image,
            "verified": r.verified, "model": r.model, "engine": r.engine}


def recipe_list() -> list[RecipeSummary]:
    """Every recipe, in the catalogue's order."""
    from backend.recipes import load_recipes

    return [RecipeSummary.model_validate(_summary(r)) for r in load_recipes().values()]


def recipe_cards() -> list[RecipeCard]:
    """Every recipe with its provenance and measured numbers in words (the Recipes mode's list)."""
    from backend.recipes import load_recipes

    cards = []
    for r in load_recipes().values():
        measured = [text.format(getattr(r.measured, key)) for key, text in _NUMBERS if r.measured is not None and getattr(r.measured, key) is not None]
        p = r.provenance
        provenance = "" if p is None else (
            p.measured_by + (f", {p.measured_on}" if p.measured_on else "") + f" on {p.hardware}" + (f" — {p.source}" if p.source else ""))
        cards.append(RecipeCard.model_validate({**_summary(r), "title": r.title or f"{r.model} ({r.engine})", "provenance": provenance, "measured": measured}))
    return cards


def recipe_detail(recipe_id: str) -> Recipe:
    """One recipe in full: image, commands, parameters, provenance, numbers, known aborts. Its
    `model_dump(mode="json")` is `c3 recipes show --json`. Refused naming the known ids."""
    from backend.recipes import get_recipe

    return get_recipe(recipe_id)


def _message(error: C3Error) -> str:
    return error.message + (f" — hint: {error.hint}" if error.hint else "")


def override_problems(recipe_id: str, overrides: tuple[str, ...]) -> list[str]:
    """Each bad `--set` entry (the recipe's own parser and known-abort rules), one line each with its
    hint, checked entry by entry so that each bad one gets its own line; [] when all are fine."""
    from backend.recipes import check_overrides, get_recipe, parse_overrides

    try:
        recipe = get_recipe(recipe_id)
    except C3Error as error:
        return [_message(error)]
    problems = []
    for pair in overrides:
        try:
            check_overrides(recipe, parse_overrides(recipe, [pair]))
        except C3Error as error:
            problems.append(_message(error))
    return problems
