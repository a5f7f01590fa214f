"""Live boot progress: phase, elapsed time and the engine's last log lines, per booting pod."""

from __future__ import annotations

from textual.content import Content

from c3.services import BootProgress


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes:02d}:{secs:02d}"


def boot_text(boots: list[BootProgress]) -> Content:
    """A few lines per boot; a failed boot keeps its last lines so the reason stays visible."""
    blocks = []
    for boot in boots:
        if boot.done and boot.ok:
            head = Content.from_markup("[$success]✓ serving[/] [b]$p[/] after $e", p=boot.pod, e=_elapsed(boot.elapsed_s))
        elif boot.done:
            head = Content.from_markup("[$error b]✗ boot failed[/] [b]$p[/] at $e", p=boot.pod, e=_elapsed(boot.elapsed_s))
        else:
            head = Content.from_markup("[$warning]◐ booting[/] [b]$p[/]  $ph  [$text-muted]$e[/]", p=boot.pod, ph=boot.phase, e=_elapsed(boot.elapsed_s))
        lines = [head] + [Content.from_markup("  [$text-muted]│ $l[/]", l=line[-200:]) for line in boot.log_tail[-3:]]
        blocks.append(Content("\n").join(lines))
    return Content("\n").join(blocks)
