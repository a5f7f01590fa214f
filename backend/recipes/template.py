"""The recipe template language: `{name}` and `{name:spec}`, filled from a closed set of names.

A recipe's command, worker command and env values are user text (recipes.d), so they are never
handed to `str.format_map`: `{model.__class__}` would reach attributes, `{rank[0]}` would index,
`{port:>999999999}` would build a 1 GB string. Every field is checked with `string.Formatter().parse`
before anything is filled (when the recipe is read, and again when it is rendered): the name must be
one of the recipe's parameters or a value c3 supplies (`BUILTIN_FIELDS`), with no attribute or index
access and no `!r`/`!s` conversion; a format spec may only align, pad and set a width up to 3 digits and
a precision up to 2 (`{port:>6}`, `{gpu_memory_utilization:.2f}`). `{{` and `}}` are literal braces.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from string import Formatter

from backend.text import show

BUILTIN_FIELDS = frozenset({"model", "served_model_name", "rank", "nnodes", "head_address", "node_address", "node_interface", "profile"})
"""The values c3 fills in besides the recipe's own parameters (`defaults`)."""

_NAME = re.compile(r"[a-z_][a-z0-9_]{0,63}")
_SPEC = re.compile(r"(?:[ 0]?[<>^=])?\d{0,3}(?:\.\d{1,2})?[dfgsxX]?")


def _parts(text: str) -> list[tuple[str, str | None, str]]:
    """(literal, field name or None, spec) pieces; ValueError naming the problem."""
    try:
        parsed = list(Formatter().parse(text))
    except ValueError as exc:  # an unmatched brace
        raise ValueError(f"`{show(text, 60)}` is not a template: {exc} (a literal brace is {{{{ or }}}})") from None
    pieces: list[tuple[str, str | None, str]] = []
    for literal, name, spec, conversion in parsed:
        if name is None:
            pieces.append((literal, None, ""))
            continue
        if not _NAME.fullmatch(name):
            raise ValueError(f"placeholder {{{show(name, 40)}}} is not a plain name (no attribute, index or position)")
        if conversion is not None:
            raise ValueError(f"placeholder {{{name}!{show(conversion, 5)}}}: conversions are not allowed")
        if not _SPEC.fullmatch(spec or ""):
            raise ValueError(f"placeholder {{{name}:{show(spec or '', 20)}}}: a format only aligns and pads, width up to 999")
        pieces.append((literal, name, spec or ""))
    return pieces


def check(text: str, names: Iterable[str]) -> None:
    """ValueError unless every placeholder of `text` is well formed and one of `names`."""
    known = set(names)
    for _, name, _spec in _parts(text):
        if name is not None and name not in known:
            raise ValueError(f"unknown placeholder {{{name}}} (known: {', '.join(sorted(known))})")


def fill(text: str, values: Mapping[str, object]) -> str:
    """`text` with its placeholders filled from `values`; ValueError on any placeholder `check` refuses."""
    out = []
    for literal, name, spec in _parts(text):
        out.append(literal)
        if name is None:
            continue
        if name not in values:
            raise ValueError(f"unknown placeholder {{{name}}} (known: {', '.join(sorted(values))})")
        try:
            out.append(format(values[name], spec))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"placeholder {{{name}:{spec}}}: {exc}") from None
    return "".join(out)
