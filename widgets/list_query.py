"""`/` filter and `s`/`S` sort for every list of the cockpit (pods, nodes, recipes, GPU processes).

`ListQuery` is the pure part: a pattern matched against each row's text (a case-insensitive regex
when it compiles, else the literal text), a sort column and a direction. `FilterBar` is the input
`/` opens: typing filters as you type, Enter keeps the filter and returns to the list, Esc clears it.
A screen mixes in `Filterable`, says how to read its rows (`row_text`, `SORTS`) and re-renders in
`query_changed()`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar, cast

from textual.binding import Binding
from textual.content import Content
from textual.dom import DOMNode
from textual.widgets import Input, Static

Row = TypeVar("Row")
PATTERN_MAX = 200
"""Longer patterns are cut: the row texts are short, and a regex is run on each, every refresh."""


@dataclass(frozen=True)
class ListQuery:
    """What a list shows: rows matching `pattern`, ordered by sort column `sort` (None: as read)."""

    pattern: str = ""
    sort: int | None = None
    reverse: bool = False
    problems_only: bool = False
    """Pods only: just those in trouble (the `!` key, `:problems`)."""

    def matcher(self) -> Callable[[str], bool]:
        """A predicate on row text; a pattern that is not a valid regex is matched literally."""
        text = self.pattern[:PATTERN_MAX]
        if not text:
            return lambda _row: True
        try:
            compiled = re.compile(text, re.IGNORECASE)
        except re.error:
            compiled = re.compile(re.escape(text), re.IGNORECASE)
        return lambda row: compiled.search(row) is not None

    def apply(self, rows: Sequence[Row], text: Callable[[Row], str], sorts: Sequence[tuple[str, Callable[[Row], Any]]]) -> list[Row]:
        """The rows to show, filtered then sorted (stable: equal keys keep the order read)."""
        match = self.matcher()
        shown = [row for row in rows if match(text(row))]
        if self.sort is not None and 0 <= self.sort < len(sorts):
            shown.sort(key=sorts[self.sort][1], reverse=self.reverse)
        elif self.reverse:
            shown.reverse()
        return shown

    def next_sort(self, columns: int) -> ListQuery:
        """`s`: the next sort column, then back to the order read (None)."""
        if columns <= 0:
            return self
        following = 0 if self.sort is None else self.sort + 1
        return replace(self, sort=following if following < columns else None)

    def describe(self, sorts: Sequence[tuple[str, Callable[[Any], Any]]], shown: int, total: int) -> Content:
        """`/ qwen · sort port ↓ · 3 of 9` (empty when nothing is filtered or sorted)."""
        parts: list[Content] = []
        if self.problems_only:
            parts.append(Content.from_markup("[$warning b]! problems only[/]"))
        if self.pattern:
            parts.append(Content.from_markup("[b]/[/] $p", p=self.pattern[:60]))
        if self.sort is not None and self.sort < len(sorts):
            parts.append(Content.from_markup("sort [b]$c[/] $d", c=sorts[self.sort][0], d="↓" if self.reverse else "↑"))
        elif self.reverse:
            parts.append(Content("reversed"))
        if not parts:
            return Content("")
        parts.append(Content.from_markup("[$text-muted]$n of $t · Esc clears[/]", n=str(shown), t=str(total)))
        return Content(" · ").join(parts)


class FilterBar(Input):
    """The `/` input. Posts nothing of its own: the screen reads `value` on `Input.Changed`."""

    DEFAULT_CSS = """
    FilterBar { height: 1; border: none; padding: 0 1; background: $panel; display: none; }
    FilterBar:focus { border: none; }
    """
    BINDINGS = [Binding("escape", "clear_filter", "Clear filter", show=False)]

    def action_clear_filter(self) -> None:
        self.value = ""
        screen = self.screen
        if isinstance(screen, Filterable):  # it always is: a FilterBar lives on a Filterable screen
            screen.action_filter_done()


class QueryLine(Static):
    """`/ qwen · sort port ↓ · 3 of 9 · Esc clears` under a list; hidden while nothing is filtered or sorted."""

    DEFAULT_CSS = """
    QueryLine { height: 1; display: none; }
    """

    def show_query(self, text: Content) -> None:
        self.display = bool(text.plain)
        self.update(text)


FILTER_BINDINGS = [
    Binding("slash", "filter", "Filter", id="filter", tooltip="Filter the list: text or a regex on each row (Esc clears)"),
    Binding("s", "sort", "Sort", id="sort", tooltip="Sort by the next column (then back to the order read)"),
    Binding("S", "sort_reverse", "Reverse", show=False, id="sort_reverse", tooltip="Reverse the sort"),
    Binding("escape", "clear_query", "Clear", show=False, id="clear_query", tooltip="Clear the filter and the sort"),
]


class Filterable:
    """Mixin for a screen with one filterable list. The screen defines `SORTS`, `list_widget()` and
    `query_changed()` (which re-renders and calls `show_query`), composes a `QueryLine` and a
    `FilterBar(id="filter-bar")`, and lists FILTER_BINDINGS."""

    SORTS: Sequence[tuple[str, Callable[[Any], Any]]] = ()
    list_query: ListQuery = ListQuery()

    def query_changed(self) -> None:  # pragma: no cover - each screen overrides
        raise NotImplementedError

    def list_widget(self) -> Any:
        """The list that keys act on (focus returns there)."""
        raise NotImplementedError

    @property
    def filter_node(self) -> DOMNode:
        """This mixin's own self as what it always is: a Textual screen."""
        return cast(DOMNode, self)

    def filtered(self, rows: Sequence[Row], text: Callable[[Row], str]) -> list[Row]:
        """The rows to show; the query line under the list says how many of how many."""
        shown = self.list_query.apply(rows, text, self.SORTS)
        for line in self.filter_node.query(QueryLine):
            line.show_query(self.list_query.describe(self.SORTS, len(shown), len(rows)))
        return shown

    def _bar(self) -> FilterBar:
        return self.filter_node.query_one("#filter-bar", FilterBar)

    def set_query(self, query: ListQuery) -> None:
        self.list_query = query
        self.query_changed()

    def action_filter(self) -> None:
        bar = self._bar()
        bar.display = True
        bar.value = self.list_query.pattern
        bar.focus()

    def action_filter_done(self) -> None:
        bar = self._bar()
        bar.display = False
        self.list_widget().focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if isinstance(event.input, FilterBar):
            event.stop()
            self.set_query(replace(self.list_query, pattern=event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if isinstance(event.input, FilterBar):
            event.stop()
            self.action_filter_done()

    def action_sort(self) -> None:
        self.set_query(self.list_query.next_sort(len(self.SORTS)))

    def action_sort_reverse(self) -> None:
        self.set_query(replace(self.list_query, reverse=not self.list_query.reverse))

    def action_clear_query(self) -> None:
        if self.list_query != ListQuery():
            self.set_query(ListQuery())
        elif hasattr(self, "action_close"):
            self.action_close()  # a modal: Esc with nothing to clear closes it
