"""The Orchestration view's "other nodes" part: the c3 pods of every registered node that is not this
machine (`c3 pod status --all-nodes`), each row marked by its node; a node that cannot be reached is
one row saying so. Rendered from the facade's reading (taken in a worker, every `NODE_PODS_PERIOD_S`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content

from backend.errors import terminal_safe

if TYPE_CHECKING:
    from backend.views.node_pods import NodePods

NODE_PODS_PERIOD_S = 15.0
"""Other nodes' pods change when someone boots one there: a read every 15 s, over SSH, in a worker."""
ROWS_MAX = 8
"""Rows shown at most (the rest counted): the estate's own pods keep the room."""
_MARK = {"running": "[$success]●[/]", "restarting": "[$warning]◐[/]", "exited": "[$error]✗[/]", "dead": "[$error]✗[/]"}


def _safe(text: str, width: int) -> str:
    """A value from another machine (a label, docker's status): shown, never obeyed, cut to `width`."""
    text = terminal_safe(text, one_line=True)
    return text if len(text) <= width else text[: width - 1] + "…"


def node_pods_content(readings: list[NodePods] | None, error: str | None, width: int = 0) -> Content | None:
    """The part's text, or None when there is nothing to show (no other node registered); one row per
    pod or node, why a node could not be read cut to the part's `width` (0 before the first layout: 80)."""
    width = width or 80
    title = Content.from_markup("[b]Other nodes[/]")
    if error is not None:
        return Content("\n").join([title, Content.from_markup(" [$error]✗[/] $e", e=error)])
    if not readings:
        return None
    rows: list[Content] = []
    for node in readings:
        name = _safe(node.node, 16)
        if not node.reachable:
            room = max(8, width - len(name) - 18)
            rows.append(Content.from_markup(" $n [$error]✗ not reachable[/] [$text-muted]$e[/]", n=name, e=_safe(node.error or "", room)))
        elif node.error:
            rows.append(Content.from_markup(" $n [$error]✗[/] $e", n=name, e=_safe(node.error, max(8, width - len(name) - 4))))
        elif not node.pods:
            rows.append(Content.from_markup(" $n [$text-muted]no c3 pods[/]", n=name))
        for pod in node.pods:
            port = f":{pod.port}" if pod.port is not None else "—"
            rows.append(Content.from_markup(f" $w {_MARK.get(pod.state, '[$text-muted]○[/]')} $s [$text-muted]$p $t[/]",
                                            w=_safe(f"{node.node}/{pod.name}", 28), s=_safe(pod.slug, 32), p=port, t=_safe(pod.state, 12)))
    if len(rows) > ROWS_MAX:
        rows = [*rows[: ROWS_MAX - 1], Content.from_markup(f" [$text-muted]+{len(rows) - ROWS_MAX + 1} more · c3 pod status --all-nodes[/]")]
    return Content("\n").join([title, *rows])
