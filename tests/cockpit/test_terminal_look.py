"""`c3 demo` in a real terminal (tmux) under 16 colours, NO_COLOR and ASCII: what the terminal is sent.

16 colours: tmux's `capture-pane -e` gives back the colours the cockpit drew with; the dialog border
must not be red (Textual's default accent and its error colour both downgrade to bright red), while a
failure still is. NO_COLOR: no colour at all. ASCII: not one non-ASCII character on screen.
"""

from __future__ import annotations

import re
import shutil

import pytest

from c3.look import to_ascii, wants_ascii
from tests.cockpit.test_tmux_smoke import C3, ROOT, Tmux

SGR = re.compile(r"\x1b\[([\d;]*)m")
RED = {1, 9}


def foregrounds(line: str) -> list[tuple[str, object]]:
    """(character, foreground) for each character of a `capture-pane -e` line; a foreground is an
    ANSI index (0–255), an RGB tuple, or None for the terminal's default."""
    out: list[tuple[str, object]] = []
    fg: object = None
    pos = 0
    for match in SGR.finditer(line + "\x1b[m"):
        out += [(char, fg) for char in line[pos:match.start()]]
        pos = match.end()
        params = [int(p) if p else 0 for p in match.group(1).split(";")] if match.group(1) else [0]
        i = 0
        while i < len(params):
            p = params[i]
            if p == 0 or p == 39:
                fg = None
            elif 30 <= p <= 37:
                fg = p - 30
            elif 90 <= p <= 97:
                fg = p - 90 + 8
            elif p in (38, 48):
                kind = params[i + 1] if i + 1 < len(params) else 0
                value = params[i + 2] if kind == 5 else tuple(params[i + 2:i + 5])
                if p == 38:
                    fg = value
                i += 2 if kind == 5 else 4
            i += 1
    return out


def demo(name: str, size: tuple[int, int], tmp_path, extra: str = "", args: str = "") -> Tmux:
    """`c3 demo ARGS` in its own tmux, with environment `extra` on top of a private home and state."""
    home, state = tmp_path / "home", tmp_path / "state"
    env = f"env C3_HOME={home} C3_STATE={state} TERM=xterm-256color {extra}"
    return Tmux(name, size[0], size[1], f"cd {ROOT} && {env} {C3} demo {args}")


@pytest.fixture
def tmux(require_service):
    require_service("tmux", shutil.which("tmux") is not None, "apt-get install tmux")
    made: list[Tmux] = []
    yield made
    for term in made:
        term.kill()


def new_pod_modal(term: Tmux) -> list[str]:
    term.wait_for(r"No pods yet")
    term.keys("N")
    term.wait_for(r"New pod")
    term.wait_for(r"[·.] on GPUs? \d")  # the verdicts are in: the modal is settled
    return capture(term)


def capture(term: Tmux) -> list[str]:
    return term.run("capture-pane", "-p", "-e", "-t", term.name).splitlines()


def test_16_colours_dialog_border_is_not_red_errors_are(tmux, tmp_path):
    term = demo("look16", (100, 30), tmp_path, args="--color 16")
    tmux.append(term)
    term.wait_for(r"No pods yet")
    # The add-node form with a bad SSH target: a dialog border and an error line on one screen.
    term.keys("2")
    term.wait_for(r"Nodes")
    term.keys("a")
    term.wait_for(r"Add node")
    term.type("spark-3")
    term.keys("Tab")
    term.type("http://10.213.0.13:8000")
    term.keys("Tab")
    term.type("ubuntu@")
    term.wait_for(r"✗")
    lines = capture(term)
    corners = [fg for line in lines for char, fg in foregrounds(line) if char in "╭╮╰╯"]
    assert corners, "no dialog border on screen:\n" + "\n".join(lines)
    assert all(isinstance(fg, int) and fg < 16 for fg in corners), f"not the 16-colour palette: {corners}"
    assert not RED & set(corners), f"the dialog border is red in 16 colours: {corners}"
    crosses = [fg for line in lines for char, fg in foregrounds(line) if char == "✗"]
    assert crosses and set(crosses) <= RED, f"an error is not red: {crosses}"


def test_no_color_sends_no_colour(tmux, tmp_path):
    term = demo("nocolor", (100, 30), tmp_path, "NO_COLOR=1")
    tmux.append(term)
    lines = new_pod_modal(term)
    coloured = {fg for line in lines for _char, fg in foregrounds(line) if fg is not None}
    assert not coloured, f"NO_COLOR set, yet colours were drawn: {sorted(map(str, coloured))[:10]}"
    assert any("New pod" in SGR.sub("", line) for line in lines)


@pytest.mark.parametrize("how", ["--ascii", "LANG=C"], ids=["flag", "locale"])
def test_ascii_mode_draws_ascii_only(how, tmux, tmp_path):
    extra, flag = ("", "--ascii") if how == "--ascii" else ("LANG=C LC_ALL= LC_CTYPE=", "")
    term = demo(f"ascii{len(extra)}", (80, 24), tmp_path, extra, flag)
    tmux.append(term)
    term.wait_for(r"No pods yet")
    term.keys("N")
    screen = term.wait_for(r"New pod.*\. on GPUs? \d")
    odd = sorted({char for char in screen if not char.isascii()})
    assert not odd, f"non-ASCII drawn in ASCII mode: {odd}\n{screen}"
    assert "+" in screen and "|" in screen  # the border is still drawn, in ASCII


def test_ascii_choice_and_mapping():
    assert wants_ascii({"LANG": "C"}) and wants_ascii({})
    assert not wants_ascii({"LANG": "en_US.UTF-8"}) and not wants_ascii({"LC_ALL": "C.utf8", "LANG": "C"})
    assert wants_ascii({"LC_ALL": "C", "LANG": "en_US.UTF-8"})  # LC_ALL wins, as in the C library
    assert wants_ascii({"LC_CTYPE": "C.UTF-8"})  # Python's own coercion of the C locale (PEP 538)
    assert not wants_ascii({"LC_CTYPE": "C.UTF-8", "LANG": "C.UTF-8"})
    assert wants_ascii({"C3_ASCII": "1", "LANG": "C.UTF-8"}) and not wants_ascii({"C3_ASCII": "0", "LANG": "C"})
    assert to_ascii("╭──╮ ✓ fits · ✗ ▶ ⚠ █▆▃ ⣿⠁ 日本") == "+--+ v fits . x > ! ##: |. ????"
    for text in ("╭──╮ ✓ fits", "█▆▃", "日本", "⣿⠁"):
        from rich.cells import cell_len

        assert cell_len(to_ascii(text)) == cell_len(text)  # widths kept: layouts do not shift
