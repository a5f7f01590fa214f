"""The log viewer: lines never cut, wrap, the runtime's timestamps, search with n/N, save, copy (OSC 52),
a bounded number of lines kept.

The model (`LogLines`) is tested on its own; the modal runs on a small app whose facade returns a
fixed log in the shape the real facade gives (`pod_logs(name, tail, timestamps=True)`: Docker's
RFC 3339 prefix). That the real Docker adapter gives that shape is `tests/runtime/test_logs_docker.py`.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from pathlib import Path

from textual.app import App

from c3.modals.logs import COPY_CAP_BYTES, LogsModal
from widgets.log_view import LogLine, LogLines, LogView, _chunks, search_pattern, short_stamp

LONG = "INFO engine: " + "x" * 150 + " END-OF-LONG-LINE"


def stamped(i: int, text: str) -> str:
    return f"2026-12-01T13:51:{i % 60:02d}.{i:09d}Z {text}"


class FakeLogs:
    """The facade's `pod_logs` alone: a growing log, stamped the way Docker stamps it."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.calls: list[tuple[int, bool]] = []

    def pod_logs(self, name: str, tail: int, timestamps: bool = False) -> list[str]:
        self.calls.append((tail, timestamps))
        return self.lines[-tail:] if timestamps else [line.split(" ", 1)[1] for line in self.lines[-tail:]]


class LogsApp(App[None]):
    CSS_PATH = Path(__file__).resolve().parents[2] / "c3" / "c3.tcss"

    def __init__(self, services) -> None:
        super().__init__()
        self.services = services
        self.clock = lambda: datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def on_mount(self) -> None:
        self.push_screen(LogsModal("chat"))


async def settle(pilot, rounds: int = 3) -> None:
    for _ in range(rounds):
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def rows(view: LogView) -> list[str]:
    """The visible rows as drawn, plain text."""
    return [view.render_line(y).text for y in range(view.scrollable_content_region.height)]


# -- the model ------------------------------------------------------------------------------------

def test_stamp_parsed_and_shortened():
    line = LogLine.parse("2026-12-01T13:51:15.123456789Z hello\tworld\x1b[31m")
    assert line.stamp == "12-01 13:51:15.123"
    assert line.text == "hello   world\\x1b[31m"  # tab expanded, ESC shown as the one sanitizer shows it, never sent to the terminal
    assert LogLine.parse("no stamp here").stamp is None
    assert short_stamp("2026-12-01T13:51:15+02:00") == "12-01 13:51:15"


def test_new_tail_appends_only_what_is_new_and_start_over_when_replaced():
    kept = LogLines(limit=10)
    assert kept.take_tail(["a", "b", "c"]) == (3, False)
    assert kept.take_tail(["b", "c", "d", "e"]) == (2, False)
    assert [line.text for line in kept.lines] == ["a", "b", "c", "d", "e"]
    assert kept.take_tail(["c", "d", "e"]) == (0, False)
    # Repeated lines: the longest overlap wins, so one new "x" is one line more, not three.
    kept.take_tail(["d", "e", "x", "x"])
    kept.take_tail(["e", "x", "x", "x"])
    assert [line.text for line in kept.lines][-4:] == ["e", "x", "x", "x"]
    assert kept.take_tail(["new container"]) == (1, True)
    assert [line.text for line in kept.lines] == ["new container"]


def test_memory_is_bounded():
    kept = LogLines(limit=100)
    for start in range(0, 1000, 50):
        kept.take_tail([f"line {i}" for i in range(max(0, start - 10), start + 50)])
    assert len(kept.lines) == 100
    assert kept.lines[-1].text == "line 999" and kept.dropped == 900


def test_search_smartcase_and_wraps_around():
    kept = LogLines()
    kept.take_tail(["Error one", "fine", "error two", "ERROR three"])
    lower = search_pattern("error")
    assert kept.matching(lower) == [0, 2, 3]
    assert kept.matching(search_pattern("ERROR")) == [3]
    assert kept.find(lower, None, forward=False) == 3
    assert kept.find(lower, 3, forward=True) == 0  # wraps, like less and vim
    assert kept.find(lower, 0, forward=False) == 3
    assert kept.find(search_pattern("absent"), None) is None


def test_wide_characters_are_never_split():
    assert _chunks("ab日本c", 3) == [(0, 2), (2, 3), (3, 5)]
    assert _chunks("x" * 7, 3) == [(0, 3), (3, 6), (6, 7)]


# -- the modal ------------------------------------------------------------------------------------

def log_with_long_line() -> FakeLogs:
    return FakeLogs([stamped(i, f"line {i}") for i in range(40)] + [stamped(40, LONG)] + [stamped(41, "last line")])


async def test_long_line_never_cut_scroll_and_wrap():
    app = LogsApp(log_with_long_line())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        modal = app.screen
        view = modal.query_one(LogView)
        assert app.services.calls[0] == (500, True)
        # One row per line: the scrollable width is the longest line, so its end is reachable.
        assert view.virtual_size.width >= len(LONG)
        view.scroll_to(view.max_scroll_x, None, animate=False, immediate=True)
        await pilot.pause()
        assert any("END-OF-LONG-LINE" in row for row in rows(view))
        await pilot.press("w")
        await pilot.pause()
        assert view.wrap and view.virtual_size.width <= view.scrollable_content_region.width
        joined = "".join(rows(view))
        assert "END-OF-LONG-LINE" in joined and LONG.replace(" ", "") in joined.replace(" ", "")
        assert "wrap on" in str(modal.query_one("#logs-title").render())


async def test_timestamps_toggle_shows_the_runtime_time():
    app = LogsApp(log_with_long_line())
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        view = app.screen.query_one(LogView)
        assert not any("12-01 13:51" in row for row in rows(view))
        await pilot.press("t")
        await pilot.pause()
        assert any(row.startswith("12-01 13:51:41.000 last line") for row in rows(view))


async def test_timestamps_absent_is_said_not_faked():
    app = LogsApp(FakeLogs([f"no-stamp {i}" for i in range(5)]))
    app.services.pod_logs = lambda name, tail, timestamps=False: [f"plain {i}" for i in range(5)]
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("t")
        await pilot.pause()
        assert app.screen.query_one(LogView).show_time is False
        assert "records no time" in str(app.screen.query_one("#logs-title").render())


async def test_search_highlights_and_n_N_move():
    logs = FakeLogs([stamped(i, f"request {i} {'ERROR boom' if i % 10 == 3 else 'ok'}") for i in range(100)])
    app = LogsApp(logs)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        modal = app.screen
        view = modal.query_one(LogView)
        await pilot.press("slash", *"error", "enter")
        await pilot.pause()
        assert view.current == 93 and not modal.follow  # the newest match; following stops to read it
        title = str(modal.query_one("#logs-title").render())
        assert "/error 10/10" in title
        shown = view.visible_lines()
        assert 93 in shown
        strip = view.render_line(view.row_of(93) - view.scroll_offset.y)
        styles = {seg.text: seg.style for seg in strip if seg.text.strip()}
        assert styles["ERROR"] is not None and styles["ERROR"].bgcolor is not None  # highlighted
        await pilot.press("N")
        await pilot.pause()
        assert view.current == 83 and "/error 9/10" in str(modal.query_one("#logs-title").render())
        await pilot.press("n", "n")
        await pilot.pause()
        assert view.current == 3  # wrapped round from the last match to the first
        assert 3 in view.visible_lines()


async def test_save_writes_whole_file_and_never_overwrites_without_asking(tmp_path, monkeypatch):
    monkeypatch.setenv("C3_STATE", str(tmp_path / "state"))
    app = LogsApp(log_with_long_line())
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        modal = app.screen
        await pilot.press("s")
        await pilot.pause()
        field = modal.query_one("#logs-input")
        default = tmp_path / "state" / "logs" / "chat-20261201-120000.log"
        assert field.value == str(default)
        await pilot.press("enter")
        await settle(pilot)
        assert default.read_text().splitlines()[-2:] == [LONG, "last line"]
        assert len(default.read_text().splitlines()) == 42
        assert f"saved 42 lines to {default}" in str(modal.query_one("#logs-title").render())
        # Again, to the same path: it asks first and keeps the file until Enter is pressed again.
        default.write_text("keep me\n")
        await pilot.press("s")
        await pilot.pause()
        field.value = str(default)
        await pilot.press("enter")
        await settle(pilot)
        assert default.read_text() == "keep me\n"
        assert "exists" in str(modal.query_one("#logs-prompt-label").render())
        await pilot.press("escape")
        await settle(pilot)
        assert default.read_text() == "keep me\n" and isinstance(app.screen, LogsModal)
        await pilot.press("s")
        await pilot.pause()
        field.value = str(default)
        await pilot.press("enter", "enter")
        await settle(pilot)
        assert len(default.read_text().splitlines()) == 42
        assert not [p for p in default.parent.iterdir() if p.name.startswith(".")]  # no temporary left


async def test_save_failure_is_one_line(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    app = LogsApp(log_with_long_line())
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await pilot.pause()
        app.screen.query_one("#logs-input").value = str(blocker / "under-a-file.log")
        await pilot.press("enter")
        await settle(pilot)
        title = str(app.screen.query_one("#logs-title").render())
        assert "✗ not saved" in title and "under-a-file.log" in title


async def test_copy_sends_visible_lines_by_osc52_with_a_cap():
    app = LogsApp(log_with_long_line())
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        written: list[str] = []
        real_write = app._driver.write
        app._driver.write = lambda data: (written.append(data), real_write(data))[1]
        await pilot.press("y")
        await pilot.pause()
        osc = [w for w in written if w.startswith("\x1b]52;c;")]
        assert osc, "no OSC 52 sequence written to the terminal"
        copied = base64.b64decode(osc[-1][len("\x1b]52;c;"):-1]).decode()
        assert copied.endswith("last line\n") and LONG in copied
        assert "copied" in str(app.screen.query_one("#logs-title").render())
        huge = FakeLogs([stamped(i, "y" * 5000) for i in range(40)])
        app.screen.lines.take_tail(huge.lines)
        app.screen.view.relayout()
        await pilot.press("y")
        await pilot.pause()
        assert len(app.clipboard.encode()) <= COPY_CAP_BYTES


async def test_follow_appends_and_pausing_stops_reading():
    logs = FakeLogs([stamped(i, f"line {i}") for i in range(10)])
    app = LogsApp(logs)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        modal = app.screen
        logs.lines.append(stamped(10, "fresh line"))
        modal.fetch()
        await settle(pilot)
        assert modal.lines.lines[-1].text == "fresh line" and len(modal.lines.lines) == 11
        await pilot.press("f")
        calls = len(logs.calls)
        modal._tick()
        await settle(pilot)
        assert len(logs.calls) == calls


async def test_wrapping_at_80x24_lays_out_for_the_scrollbar_it_brings():
    """Issue 25: unwrapped, a dozen long lines fit the pane's height (no vertical scrollbar); wrapped
    they do not, and the scrollbar that then appears took 2 columns the rows had been laid out for —
    2 characters at every wrap point hidden under it until another key re-laid the view out."""
    lines = [stamped(i, f"line{i:02d} " + "".join(chr(ord("a") + (i + k) % 26) for k in range(140)) + f" END{i:02d}") for i in range(12)]
    app = LogsApp(FakeLogs(lines))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        view = app.screen.query_one(LogView)
        assert not view.show_vertical_scrollbar and view.scrollable_content_region.height >= 12  # unwrapped: all rows fit
        await pilot.press("w")
        await settle(pilot)
        assert view.wrap and view.show_vertical_scrollbar  # wrapped: more rows than the pane is high
        width = view.scrollable_content_region.width
        drawn = rows(view)
        assert all(len(row.rstrip()) <= width for row in drawn), [len(row.rstrip()) for row in drawn]
        view.scroll_to(0, view.max_scroll_y, animate=False, immediate=True)
        await pilot.pause()
        tail = "".join(row.rstrip() for row in rows(view))
        assert lines[-1].split(" ", 1)[1] in tail  # the last line whole, every character on screen
