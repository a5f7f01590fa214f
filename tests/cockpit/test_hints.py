"""Hints shown in the cockpit speak its language: keys and fields, not the CLI's commands and flags.

Every hint literal of the backend modules whose refusals reach the cockpit's writes (gates, estate
validation and edits, ports, boot, runtimes, the node registry) is read from the source and passed
through `cockpit_hint`: no `c3 pod …`/`c3 node rm` command and no `--flag` may be left, except the
one thing the cockpit cannot do (force a plan), which is said to be a shell command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from c3.hints import cockpit_hint

ROOT = Path(__file__).resolve().parents[2]
MODULES = ["backend/runtime/gates.py", "backend/estate/validate.py", "backend/estate/ops.py", "backend/estate/ports.py",
           "backend/runtime/boot.py", "backend/sim/runtime.py", "backend/runtime/docker_adapter.py", "backend/nodes/registry.py",
           "c3/services_real.py"]
HINT = re.compile(r'hint=f?"((?:[^"\\]|\\.)*)"')


def backend_hints() -> list[tuple[str, str]]:
    out = []
    for module in MODULES:
        for literal in HINT.findall((ROOT / module).read_text(encoding="utf-8")):
            out.append((module, re.sub(r"\{[^}]*\}", "chat", literal)))
    return out


def test_hints_are_found():
    assert len(backend_hints()) >= 15


@pytest.mark.parametrize(("module", "hint"), backend_hints())
def test_no_cli_flag_or_pod_command_left(module, hint):
    shown = cockpit_hint(hint)
    rest = shown.replace("`c3 … --force` from a shell", "").replace("restart c3 without --readonly", "")
    assert not re.search(r"(?<![\w-])--[a-z]", rest), f"{module}: {shown!r}"
    assert not re.search(r"`c3 (pod|node rm|node ls|gpus|catalog)", rest), f"{module}: {shown!r}"


def test_examples():
    assert cockpit_hint("`c3 pod down chat` first") == "select pod chat and press d first"
    assert cockpit_hint("choose another --port, or leave it out for a free one") == "change the Port field (the form proposes a free one)"
    assert cockpit_hint("pass --force to plan it anyway") == "`c3 … --force` from a shell (the cockpit never forces)"
    assert cockpit_hint(None) is None


async def test_results_and_errors_on_screen_name_the_key_not_the_command(shared_world):
    """The wiring: whatever write result or error reaches the result line goes through `cockpit_hint`
    (a gate's real hint, as `backend/runtime/gates.py` words it)."""
    from backend.errors import Refused
    from c3.services import WriteResult
    from tests.cockpit.conftest import real_app, screen_text, settle

    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.show_result(WriteResult(False, "port 8020 is held by running pod chat", "`c3 pod down chat`, or give this pod another port"))
        await settle(pilot)
        assert "select pod chat and press d, or give this pod another port (its Port field)" in screen_text(app)
        assert "`c3 pod down" not in screen_text(app)
        app._write_failed(Refused("pod `chat` already exists", hint="`c3 pod rm chat` first, or choose another name"))
        await settle(pilot)
        assert "select pod chat and press x first" in screen_text(app)
