"""The cockpit's tables. `SafeTable`: every text cell passes the one output sanitizer as one line (a
name with a newline would otherwise show only its first line in a one-row cell; see c3/look.py).
`NavTable` adds the list keys: `j`/`k` move the row cursor like the arrows (Help lists them for every
list), and the cursor stops at the ends instead of wrapping."""

from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.content import Content
from textual.widgets import DataTable
from textual.widgets.data_table import CellType, ColumnKey, RowKey

from backend.errors import UNSAFE_LINE, terminal_safe


def one_line(cell: Any) -> Any:
    """A cell as it may be drawn: text with control characters, CR and LF shown as escapes. Styled
    content that needs it is shown plain (the style of hostile text is not worth keeping)."""
    if isinstance(cell, str):
        return terminal_safe(cell, one_line=True)
    if isinstance(cell, Content) and UNSAFE_LINE.search(cell.plain):
        return Content(terminal_safe(cell.plain, one_line=True))
    return cell


class SafeTable(DataTable[Any]):
    """DataTable whose cells are shown through `one_line`."""

    def add_row(self, *cells: CellType, height: int | None = 1, key: str | None = None, label: Any = None) -> RowKey:
        return super().add_row(*(one_line(cell) for cell in cells), height=height, key=key, label=label)

    def update_cell(self, row_key: RowKey | str, column_key: ColumnKey | str, value: CellType, *, update_width: bool = False) -> None:
        super().update_cell(row_key, column_key, one_line(value), update_width=update_width)


class NavTable(SafeTable):
    """SafeTable + vim keys."""

    BINDINGS = [
        Binding("j", "cursor_down", "Next", show=False),
        Binding("k", "cursor_up", "Previous", show=False),
    ]
