"""One GPU's panel: name, temperature, power, holder; memory and util bars with sparkline history."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.content import Content
from textual.widget import Widget

from backend.errors import terminal_safe

if TYPE_CHECKING:
    from backend.models import GpuSnapshot
from widgets.meters import bar, gib, sparkline


def short_name(name: str) -> str:
    """`NVIDIA GeForce RTX 3090` → `RTX 3090`; one line whatever the driver (or a remote node) said."""
    for prefix in ("NVIDIA GeForce ", "NVIDIA "):
        if name.startswith(prefix):
            return terminal_safe(name[len(prefix):], one_line=True)
    return terminal_safe(name, one_line=True)


class GpuPanel(Widget):
    """Three lines for one GPU. Renders what it is handed; does no I/O."""

    DEFAULT_CSS = """
    GpuPanel { height: 3; margin-bottom: 1; }
    """

    def __init__(self, index: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.index = index
        self.snapshot: GpuSnapshot | None = None
        self.util_history: list[float] = []
        self.mem_history: list[float] = []
        self.holder = ""
        self._key: tuple[object, ...] | None = None

    def _widths(self) -> tuple[int, int, int]:
        """(panel, bar, sparkline) widths in cells at the panel's current size."""
        width = max(30, self.size.width)
        bar_w = max(6, (width - 18) // 2)
        return width, bar_w, max(4, width - 18 - bar_w)

    def show(self, snapshot: GpuSnapshot, util_history: list[float], mem_history: list[float], holder: str) -> None:
        """Hand the panel a new reading; repaints only when something visible changed (the sparklines
        are compared over the readings they draw: a history that grows beyond them changes nothing)."""
        width, _, spark_w = self._widths()
        key = (tuple(v for k, v in snapshot if k != "taken_at"), width, tuple(util_history[-spark_w:]), tuple(mem_history[-spark_w:]), holder)
        if key == self._key:
            return
        self._key = key
        self.snapshot, self.util_history, self.mem_history, self.holder = snapshot, util_history, mem_history, holder
        self.refresh()

    def render(self) -> Content:
        snap = self.snapshot
        if snap is None:
            return Content.from_markup(f"[b]GPU{self.index}[/]  [$text-muted]waiting for the first reading…[/]")
        width, bar_w, spark_w = self._widths()
        total = snap.gpu.total_mib
        used = snap.used_mib
        mem_pct = 100.0 * (used or 0) / total if total else 0.0
        util = snap.util_pct
        temp = f"{snap.temp_c}°C" if snap.temp_c is not None else "?°C"
        if snap.power_w is not None and snap.power_limit_w:
            power = f"{snap.power_w:.0f}/{snap.power_limit_w:.0f}W"
        elif snap.power_w is not None:
            power = f"{snap.power_w:.0f}W"
        else:
            power = "?W"
        head = f"GPU{snap.gpu.index} {short_name(snap.gpu.name)}"
        facts = f"{temp} {power}"
        room = max(4, width - len(head) - len(facts) - 3)
        text = self.holder if len(self.holder) <= room else self.holder[: room - 1] + "…"
        holder = Content.from_markup("[$accent]$h[/]", h=text) if text else Content.from_markup("[$text-muted]idle[/]")
        pad = max(1, width - len(head) - len(facts) - len(holder.plain) - 1)
        line1 = Content.assemble(Content.from_markup("[b]$h[/]", h=head), " ", holder, " " * pad, facts)
        mem_text = f"{gib(used)}/{gib(total)}G" if total else "unified"
        line2 = Content.from_markup(
            f"mem  {bar(mem_pct, bar_w, warn=95, crit=99)} {mem_text:>11} [$text-muted]{sparkline(self.mem_history, spark_w)}[/]"
        )
        util_text = f"{util}%" if util is not None else "?"
        line3 = Content.from_markup(
            f"util {bar(float(util or 0), bar_w, warn=75, crit=101)} {util_text:>11} [$text-muted]{sparkline(self.util_history, spark_w)}[/]"
        )
        return Content("\n").join([line1, line2, line3])
