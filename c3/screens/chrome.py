"""Top-of-screen chrome shared by the modes: the mode bar and the sources line."""

from __future__ import annotations

from textual.content import Content

MODES = (("orchestration", "1", "Orchestration"), ("nodes", "2", "Nodes"), ("recipes", "3", "Recipes"))


def mode_bar(active: str, label: str, readonly: bool) -> Content:
    """` c3  [1 Orchestration]  2 Nodes  3 Recipes   demo rig   READ-ONLY`."""
    parts = [Content.from_markup("[b $accent] c3 [/] ")]
    for mode, key, title in MODES:
        if mode == active:
            parts.append(Content.from_markup(f"[reverse b] {key} {title} [/] "))
        else:
            parts.append(Content.from_markup(f"[$text-muted] {key} {title} [/] "))
    parts.append(Content.from_markup("  [$text-muted]$l[/]", l=label))
    if readonly:
        parts.append(Content.from_markup("  [$warning b]READ-ONLY[/]"))
    return Content.assemble(*parts)
