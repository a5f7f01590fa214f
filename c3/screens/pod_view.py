"""The pod view: each pod's header line, its GPUs stacked beneath, and a free-GPU line.

`name  slug:port  ● state  badge` where the badge is `✓ placed`, `⚠ PLACEMENT MISMATCH` (with what is
wrong on the next line) or `? placement unknown` (with why). An OptionList gives selection, keys and
scrolling for free; each pod is one multi-line option keyed by its name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.binding import Binding
from textual.content import Content, Span
from textual.widgets import OptionList
from textual.widgets.option_list import Option

if TYPE_CHECKING:
    from textual.geometry import Region
    from textual.strip import Strip

    from backend.models import GpuSnapshot
from c3.look import shown
from c3.metrics_text import Form, metrics_line
from c3.services import PodState
from widgets.gpu_panel import short_name
from widgets.meters import gib


def metrics_form(width: int) -> Form:
    """The metrics line that fits a pod list this wide (a wrapped line would push the GPUs off)."""
    return "wide" if width >= 100 else "medium" if width >= 52 else "narrow"

STATE_GLYPH = {
    "serving": ("●", "$success"),
    "booting": ("◐", "$warning"),
    "failed": ("✗", "$error"),
    "down": ("○", "$text-muted"),
    "unknown": ("?", "$text-muted"),
}


def badge(pod: PodState) -> str:
    """The placement badge as markup."""
    if pod.placement == "ok":
        return "[$success]✓ placed[/]"
    if pod.placement == "mismatch":
        return "[$error b]⚠ PLACEMENT MISMATCH[/]"
    return "[$text-muted]? placement unknown[/]"


def pod_prompt(pod: PodState, gpus: dict[int, GpuSnapshot], *, form: Form = "medium") -> Content:
    """The multi-line text of one pod (`form`: how much of the engine-metrics line)."""
    glyph, style = STATE_GLYPH.get(pod.state, ("?", "$text-muted"))
    head = Content.from_markup(
        f"[b]$name[/]  [$text-muted]$slug:$port[/]  [{style}]{glyph} {pod.state}[/]  {badge(pod)}",
        name=pod.name, slug=shown(pod.slug), port=str(pod.port),
    )
    lines = [head]
    if pod.placement != "ok" and pod.placement_detail:
        tone = "$error" if pod.placement == "mismatch" else "$text-muted"
        lines.append(Content.from_markup(f"  [{tone}]$d[/]", d=shown(pod.placement_detail)))
    if pod.metrics is not None and pod.metrics_error:
        # The last scrape failed (a busy engine past the timeout): the last numbers, with when they were read.
        at = pod.metrics.taken_at.astimezone().strftime("%H:%M:%S")
        lines.append(Content.from_markup("  [$text-muted]$m[/] [$warning]⚠ as of $at[/]", m=metrics_line(pod.metrics, form=form), at=at))
    elif pod.metrics is not None:
        lines.append(Content.from_markup("  [$text-muted]$m[/]", m=metrics_line(pod.metrics, form=form)))
    elif pod.metrics_error:
        lines.append(Content.from_markup("  [$warning]metrics: $e[/]", e=shown(pod.metrics_error)))
    # The GPUs it claims, and — when its processes were seen elsewhere — the ones it really runs on.
    actual = pod.actual_gpus if pod.placement == "mismatch" and pod.actual_gpus is not None else None
    listed = list(pod.gpus) + [i for i in actual or () if i not in pod.gpus]
    for n, index in enumerate(listed):
        branch = "└─" if n == len(listed) - 1 else "├─"
        note = ""
        if actual is not None and index not in actual:
            note = "  [$text-muted](claimed, unused)[/]"
        elif actual is not None and index not in pod.gpus:
            note = "  [$error b]⚠ runs here[/]"
        snap = gpus.get(index)
        if snap is None:
            lines.append(Content.from_markup(f"  {branch} GPU{index} [$text-muted](not seen on this rig)[/]{note}"))
            continue
        mem = f"{gib(snap.used_mib)}/{gib(snap.gpu.total_mib)}G"
        util = f"{snap.util_pct}%" if snap.util_pct is not None else "?"
        if form == "narrow":
            # 80 columns: the GPU panels beside the list name the model; a wrapped GPU line would
            # make each pod taller than it looks and push its GPUs out of view as the list scrolls.
            lines.append(Content.from_markup(f"  {branch} GPU{index} [$text-muted]$m $u[/]{note}", m=mem, u=util))
            continue
        lines.append(Content.from_markup(f"  {branch} GPU{index} $n  [$text-muted]$m · util $u[/]{note}", n=shown(short_name(snap.gpu.name)), m=mem, u=util))
    return Content("\n").join(lines)


def free_line(pods: list[PodState], gpus: dict[int, GpuSnapshot], holders: dict[int, str] | None = None) -> Content:
    """`free: GPU2 GPU3` — GPUs no pod of the estate claims (and who uses one anyway, if anyone)."""
    claimed = {i for pod in pods for i in pod.gpus}
    free = [i for i in sorted(gpus) if i not in claimed]
    if not gpus:
        return Content.from_markup("[$text-muted]free: (no GPU reading yet)[/]")
    if not free:
        return Content.from_markup("free: [$text-muted](none — every GPU is claimed by a pod)[/]")
    parts = []
    for i in free:
        busy = (holders or {}).get(i)
        if busy:
            parts.append(Content.from_markup("[$warning]GPU$i (in use: $b)[/]", i=str(i), b=busy))
        else:
            parts.append(Content.from_markup("[$success]GPU$i[/]", i=str(i)))
    return Content.assemble("free: ", Content(" ").join(parts))


class PodList(OptionList):
    """Selectable pods. Keeps the highlighted pod across refreshes."""

    BINDINGS = [
        Binding("j", "cursor_down", "Next", show=False),
        Binding("k", "cursor_up", "Previous", show=False),
    ]

    DEFAULT_CSS = """
    PodList, PodList:focus { height: 1fr; border: none; padding: 0; background: transparent; }
    PodList > .option-list--option { padding: 0 0 1 0; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._key: tuple[tuple[str, ...], tuple[tuple[str, tuple[Span, ...]], ...]] | None = None
        self._shown: tuple[list[PodState], dict[int, GpuSnapshot]] | None = None
        self._measured_at = 0
        """The content width the options' heights were last measured at."""

    @property
    def selected_pod(self) -> str | None:
        """Name of the highlighted pod."""
        if self.highlighted is None or self.option_count == 0:
            return None
        return self.get_option_at_index(self.highlighted).id

    def show(self, pods: list[PodState], gpus: dict[int, GpuSnapshot]) -> None:
        """Replace the options when anything visible changed; the highlight follows the pod name."""
        self._shown = (pods, gpus)
        form = metrics_form(self.size.width)
        prompts = [pod_prompt(pod, gpus, form=form) for pod in pods]
        # Keyed on what is drawn, not on the readings: each scrape of a pod's /metrics is a new reading
        # (a new `taken_at`) even when every number on screen stays the same.
        names = [p.name for p in pods]
        drawn = [(c.plain, tuple(c.spans)) for c in prompts]
        key = (tuple(names), tuple(drawn))
        if key == self._key:
            return
        previous, self._key = self._key, key
        if previous is not None and previous[0] == key[0]:  # the same pods: repaint only the ones that changed
            for index, (before, now) in enumerate(zip(previous[1], drawn, strict=True)):
                if before != now:
                    self.replace_option_prompt_at_index(index, prompts[index])
            return
        selected = self.selected_pod
        self.clear_options()
        self.add_options([Option(prompt, id=name) for prompt, name in zip(prompts, names, strict=True)])
        if pods:
            self.highlighted = names.index(selected) if selected in names else 0

    def action_cursor_down(self) -> None:
        """Stop at the last pod: wrapping to the first would put `x` on a pod the user did not mean."""
        if self.highlighted is None or self.highlighted < self.option_count - 1:
            super().action_cursor_down()

    def action_cursor_up(self) -> None:
        """Stop at the first pod (no wrap-around, as above)."""
        if self.highlighted is None or self.highlighted > 0:
            super().action_cursor_up()

    def on_resize(self) -> None:
        """The metrics line's form follows the width."""
        if self._shown is not None:
            self.show(*self._shown)

    def render_lines(self, crop: Region) -> list[Strip]:
        """Measure the options again whenever the width they are drawn at changed. OptionList measures
        each option's height once, at the width it had then; its scrollbar coming or going (the list
        outgrew its height: the first reading, a filter cleared) changes that width by two columns
        without a resize, and a line that wraps only at the new width lost its tail and the lines
        below it (issue 14: "drops GPU lines once it scrolls"). Setting a prompt again is the public
        way to make it measure anew."""
        width = self.scrollable_content_region.width
        if width != self._measured_at and self.option_count:
            self._measured_at = width
            self.replace_option_prompt_at_index(0, self.get_option_at_index(0).prompt)
        return super().render_lines(crop)
