"""Live boot progress: phase, elapsed time and the engine's last log lines, per booting pod — and the
pod states shown beside it, read from the same boots so the two never disagree."""

from __future__ import annotations

from dataclasses import replace

from textual.content import Content

from c3.look import shown
from c3.services import BootProgress, PodState


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
        lines = [head] + [Content.from_markup("  [$text-muted]│ $l[/]", l=shown(line[-200:])) for line in boot.log_tail[-3:]]
        blocks.append(Content("\n").join(lines))
    return Content("\n").join(blocks)


SETTLE_S = 10.0
"""How long a boot that just reported `serving` outranks pod readings that still say otherwise (a
reading lags the boot's own probe by up to one health check of the live hub)."""


def as_shown(pods: list[PodState], boots: dict[str, BootProgress], served: dict[str, float], now: float) -> list[PodState]:
    """The pod readings as the pod view, the GPU panels, details and the trouble count show them next
    to the boot panel, so none of them contradicts it (`○ down` beside `◐ booting`):
    - while c3's own boot of a pod is in flight, that boot is the freshest word on it: `booting`,
      whatever the last reading said (down before the container exists, serving a moment before the
      boot's probe answers, failed a moment before the boot reports it);
    - a boot that reported `serving` (in `served`, with the monotonic time it did) outranks readings
      that still say booting or down for `SETTLE_S`: they were taken before its probe answered.
      A reading that says failed is news and is shown."""
    shown = []
    for pod in pods:
        boot = boots.get(pod.name)
        if boot is not None and not boot.done and pod.state != "booting":
            pod = replace(pod, state="booting")
        elif pod.name in served and now - served[pod.name] < SETTLE_S and pod.state in ("booting", "down", "unknown"):
            pod = replace(pod, state="serving")
        shown.append(pod)
    return shown
