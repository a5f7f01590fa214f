"""The cockpit's glue is typed (issue 23): screens and modals reach the app through `self.cockpit`
(c3/cockpit.py, a Protocol that mypy checks `C3App` against), so c3/ and widgets/ need no
`type: ignore[attr-defined]` to call the app's own methods."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNTYPED = re.compile(r"type:\s*ignore\[[^\]]*attr-defined")

pytestmark = pytest.mark.static


def untyped_lines(*folders: str) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for folder in folders
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if UNTYPED.search(line)
    ]


def test_front_ends_hold_no_attr_defined_ignores():
    found = untyped_lines("c3", "widgets")
    assert found == [], f"{len(found)} untyped attribute accesses (use self.cockpit, or type the mixin's self):\n" + "\n".join(found)


def test_the_check_sees_an_ignore():
    assert UNTYPED.search("x = self.app.clock()  # type: ignore[attr-defined]")
    assert UNTYPED.search("return y  # type: ignore[attr-defined, no-any-return]")
    assert not UNTYPED.search("x = 1  # type: ignore[assignment]")
