"""A DataTable with the cockpit's list keys: `j`/`k` move the row cursor like the arrows (Help lists
them for every list), and the cursor stops at the ends instead of wrapping."""

from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.widgets import DataTable


class NavTable(DataTable[Any]):
    """DataTable + vim keys."""

    BINDINGS = [
        Binding("j", "cursor_down", "Next", show=False),
        Binding("k", "cursor_up", "Previous", show=False),
    ]
