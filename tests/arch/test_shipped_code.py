"""What ships (c3/, widgets/, backend/) carries no test doubles, never reaches into tests/, and the
cockpit uses only Textual's public API for its screens."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("c3", "widgets", "backend")


def sources(*packages: str) -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for package in packages for path in sorted((ROOT / package).rglob("*.py"))}


def test_no_fake_facade_ships_and_nothing_imports_tests():
    offenders = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p, text in sources(*SHIPPED).items()
                 for m in re.finditer(r"FakeServices|^\s*(from|import) tests\b.*$", text, re.MULTILINE)]
    assert offenders == []


def test_the_cockpit_touches_no_private_textual_attribute():
    private = r"\._(screen_stacks|current_mode|installed_screens|compose_stacks|screen_stack)\b"
    offenders = [f"{p.relative_to(ROOT)}:{text[: m.start()].count(chr(10)) + 1}" for p, text in sources("c3", "widgets").items() for m in re.finditer(private, text)]
    assert offenders == []
