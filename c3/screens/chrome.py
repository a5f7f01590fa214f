"""Top-of-screen chrome shared by the modes: the mode bar and the sources line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content

from c3.look import shown

if TYPE_CHECKING:
    from c3.services import WriteResult

MODES = (("orchestration", "1", "Orchestration"), ("nodes", "2", "Nodes"), ("recipes", "3", "Recipes"))


def mode_bar(active: str, label: str, readonly: bool, trouble: str = "") -> Content:
    """` c3  [1 Orchestration]  2 Nodes  3 Recipes  ⚠ 1 failed · 1 misplaced  demo rig   READ-ONLY`."""
    parts = [Content.from_markup("[b $accent] c3 [/] ")]
    for mode, key, title in MODES:
        if mode == active:
            parts.append(Content.from_markup(f"[reverse b] {key} {title} [/] "))
        else:
            parts.append(Content.from_markup(f"[$text-muted] {key} {title} [/] "))
    if trouble:  # before the rig's label: at 80 columns the label is what gets cut, not the alarm
        parts.append(Content.from_markup(" [$error b]⚠ $t[/]", t=shown(trouble)))
    parts.append(Content.from_markup("  [$text-muted]$l[/]", l=shown(label)))
    if readonly:
        parts.append(Content.from_markup("  [$warning b]READ-ONLY[/]"))
    return Content.assemble(*parts)


def result_line(result: WriteResult | None, idle: str) -> Content:
    """The last write's outcome (`✓ …` or `✗ refused: … — hint: …`), or `idle` before any write."""
    if result is None:
        return Content.from_markup("[$text-muted]$i[/]", i=idle)
    if result.ok:
        return Content.from_markup("[$success]✓[/] $m", m=shown(result.message + (f" — {result.hint}" if result.hint else "")))
    return Content.from_markup("[$error b]✗ refused:[/] $m", m=shown(result.message + (f" — hint: {result.hint}" if result.hint else "")))


def gib(mib: int | None) -> str:
    """MiB as GiB with one decimal ("?" when unknown)."""
    return "?" if mib is None else f"{mib / 1024:.1f}"
