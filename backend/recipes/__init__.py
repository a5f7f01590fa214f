"""Recipes: built-ins shipped in backend/recipes/data/, with `$C3_HOME/recipes.d/*.yaml` merged over them.

A file holds one recipe mapping or `recipes: [ … ]`. A user recipe with a built-in's id replaces it.
"""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import ValidationError

from backend import limits, paths, strict_yaml
from backend.errors import Refused, UsageError
from backend.recipes import template
from backend.recipes.schema import (
    DockerOptions,
    Hardware,
    KnownAbort,
    Measured,
    ParamValue,
    Provenance,
    Recipe,
    image_problem,
    port_problem,
)
from backend.text import show
from backend.userfiles import read_text

BUILTIN_DIR = Path(__file__).parent / "data"

__all__ = [
    "DockerOptions",
    "Hardware",
    "KnownAbort",
    "Measured",
    "ParamValue",
    "Provenance",
    "Recipe",
    "check_overrides",
    "check_values",
    "get_recipe",
    "image_problem",
    "load_recipes",
    "parse_overrides",
    "port_problem",
    "template",
]


def _read_file(path: Path) -> list[Recipe]:
    data = strict_yaml.load(read_text(path, what="recipe file"), source=str(path), what="recipe file")
    items = data.get("recipes") if isinstance(data, dict) and "recipes" in data else [data]
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise UsageError(f"recipe file {path} must hold a recipe mapping or `recipes: [...]`")
    recipes = []
    for item in items:
        try:
            recipes.append(Recipe.model_validate({**item, "source_file": str(path)}))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "recipe"
            msg = str(err["msg"]).removeprefix("Value error, ")
            raise UsageError(f"recipe file {path}: {show(where, 60)}: {show(msg, 160)}", hint="see `c3 recipes show ID` for a valid recipe") from None
    return recipes


def load_recipes(user_dir: Path | None = None) -> dict[str, Recipe]:
    """All recipes by id: built-ins, then the user's (which win)."""
    found: dict[str, Recipe] = {}
    for folder in (BUILTIN_DIR, user_dir or paths.user_recipes_dir()):
        if not folder.is_dir():
            continue
        for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
            for recipe in _read_file(path):
                found[recipe.id] = recipe
    return found


def get_recipe(recipe_id: str) -> Recipe:
    """One recipe; Refused with the known ids for an unknown one."""
    recipes = load_recipes()
    if recipe_id not in recipes:
        known = ", ".join(sorted(recipes)) or "none"
        raise Refused(f"no recipe `{recipe_id}`", hint=f"known recipes: {known} (`c3 recipes list`)")
    return recipes[recipe_id]


def _coerce(text: str, like: ParamValue | None) -> ParamValue:
    if isinstance(like, bool):
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise UsageError(f"`{text}` is not a boolean")
    if isinstance(like, int):
        try:
            return int(text)
        except ValueError:
            raise UsageError(f"`{text}` is not an integer") from None
    if isinstance(like, float):
        try:
            return float(text)
        except ValueError:
            raise UsageError(f"`{text}` is not a number") from None
    return text


def parse_overrides(recipe: Recipe, pairs: list[str] | tuple[str, ...]) -> dict[str, ParamValue]:
    """`key=value` strings → typed overrides of the recipe's defaults (or `image`)."""
    out: dict[str, ParamValue] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        key = key.strip()
        if not eq or not key:
            raise UsageError(f"--set `{pair}` is not key=value")
        if key != "image" and key not in recipe.defaults:
            allowed = ", ".join(["image", *sorted(recipe.defaults)])
            raise UsageError(f"--set {key}: recipe `{recipe.id}` has no parameter `{key}`", hint=f"parameters: {allowed}")
        try:
            out[key] = value if key == "image" else _coerce(value, recipe.defaults[key])
        except UsageError as exc:
            raise UsageError(f"--set {key}: {exc.message}") from None
    check_values(out)
    return out


def check_values(overrides: dict[str, ParamValue]) -> None:
    """UsageError for an override `image` that is not an image reference or a `port` that is not a TCP
    port: checked before any node is touched, since both reach `docker run` and the profile's URL."""
    for problem in (image_problem(overrides["image"]) if "image" in overrides else None,
                    port_problem(overrides["port"], "--set port") if "port" in overrides else None,
                    *(_number_problem(key, value) for key, value in overrides.items())):
        if problem:
            raise UsageError(problem, hint="see `c3 recipes show ID` for the recipe's parameters")


FRACTION_PARAMS = frozenset({"gpu_memory_utilization", "mem_fraction_static"})
"""Recipe parameters that are a share of GPU memory: 0 < x ≤ 1 (backend.limits.fraction)."""


def _number_problem(key: str, value: ParamValue) -> str | None:
    """A fraction outside (0, 1], or any float override that is NaN or ±inf (`--set x=nan` parses as a
    float, and NaN passes every known-abort rule, since every comparison with it is False)."""
    if key in FRACTION_PARAMS:
        try:
            limits.fraction(value, f"--set {key}")
        except ValueError as error:
            return str(error)
    elif isinstance(value, float) and not math.isfinite(value):
        return f"--set {key} is {value}: not a finite number"
    return None


def check_overrides(recipe: Recipe, overrides: dict[str, ParamValue]) -> None:
    """Refuse an override known to abort on the recipe's hardware (before any node is touched)."""
    for key, value in overrides.items():
        rule = recipe.aborts_for(key, value)
        if rule is not None:
            src = f" ({rule.source})" if rule.source else ""
            raise Refused(
                f"{key}={value} is known to abort on {recipe.hardware.id}: {rule.why}{src}",
                hint=f"recipe `{recipe.id}` refuses {key} {rule.op} {rule.value} on this hardware; nothing was started",
            )
