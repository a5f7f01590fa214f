"""The cockpit's glue is typed (issue 23): screens and modals reach the app through `self.cockpit`
(c3/cockpit.py, a Protocol that mypy checks `C3App` against), so c3/ and widgets/ need no
`type: ignore[attr-defined]` to call the app's own methods."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNTYPED = re.compile(r"type:\s*ignore\[[^\]]*attr-defined")
# Asking the facade (or what might be one) what it can do, instead of its type saying so.
DUCKED = re.compile(r"(hasattr|getattr)\((self\.)?(app\.)?services\b")

pytestmark = pytest.mark.static


def untyped_lines(*folders: str, pattern: re.Pattern[str] = UNTYPED) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for folder in folders
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]


def test_front_ends_hold_no_attr_defined_ignores():
    found = untyped_lines("c3", "widgets")
    assert found == [], f"{len(found)} untyped attribute accesses (use self.cockpit, or type the mixin's self):\n" + "\n".join(found)


def test_the_check_sees_an_ignore():
    assert UNTYPED.search("x = self.app.clock()  # type: ignore[attr-defined]")
    assert UNTYPED.search("return y  # type: ignore[attr-defined, no-any-return]")
    assert not UNTYPED.search("x = 1  # type: ignore[assignment]")


def test_the_facade_is_never_asked_what_it_can_do():
    """`C3App` takes `services=` or `factory=` explicitly, and `subscribe`, `set_live` and `close` are the
    facade Protocol's own (c3/services.py): nothing in c3/ duck-types the facade with hasattr/getattr."""
    found = untyped_lines("c3", pattern=DUCKED)
    assert found == [], f"{len(found)} duck-typed facade checks (name the capability in the Services Protocol):\n" + "\n".join(found)


def test_the_duck_check_sees_one():
    assert DUCKED.search('if hasattr(services, "pod_states"):')
    assert DUCKED.search('closer = getattr(app.services, "close", None)')
    assert not DUCKED.search("services.subscribe(pushed)")
