"""The pure parts of the monitor views: the time chart's buckets, scale and axis; the list query's
filter and sort; `:` command resolution."""

from __future__ import annotations

from c3.modals.command_line import completions, resolve
from widgets.list_query import ListQuery
from widgets.time_chart import buckets, chart, nice_top, time_axis

NOW = 1_000_000.0


def test_buckets_take_the_peak_and_leave_gaps():
    points = [(NOW - 500, 99.0), (NOW - 59.5, 10.0), (NOW - 59.2, 30.0), (NOW - 0.1, 5.0), (NOW + 5, 77.0)]  # the first and last are outside
    cells = buckets(points, NOW, 60.0, 6)
    assert cells == [30.0, None, None, None, None, 5.0]


def test_chart_scale_zero_and_height():
    rows = chart([(NOW - 1, 50.0), (NOW, 0.0)], now=NOW, window_s=10, width=27, height=2, top=100.0)
    assert len(rows) == 2
    top, bottom = (r.plain for r in rows)
    assert top.startswith("  100 ▕") and bottom.startswith("    0 ▕")
    assert bottom.endswith("█·")  # 50 % of two rows fills the bottom one; a zero reading is a dot, not a blank
    assert top.endswith("  ")  # nothing above half


def test_nice_top_and_axis():
    assert nice_top([0.0]) == 1.0 and nice_top([7.0]) == 10.0 and nice_top([130.0]) == 200.0 and nice_top([401.0], 50) == 500.0
    axis = time_axis(300, 60)
    assert axis.startswith("-5m") and axis.endswith("now") and "-1m" in axis and len(axis) == 60


def test_list_query_regex_literal_fallback_sort_and_reverse():
    rows = ["chat vllm 8020", "coder vllm 8024", "odd custom 8900"]
    sorts = [("name", lambda r: r), ("port", lambda r: -int(r.split()[-1]))]
    assert ListQuery("^c").apply(rows, str, sorts) == rows[:2]
    assert ListQuery("VLLM").apply(rows, str, sorts) == rows[:2]  # case-insensitive
    assert ListQuery("[oops").apply(rows + ["[oops"], str, sorts) == ["[oops"]  # not a regex: literal
    q = ListQuery().next_sort(2).next_sort(2)
    assert q.sort == 1 and q.apply(rows, str, sorts) == list(reversed(rows))
    assert q.next_sort(2).sort is None  # after the last column: the order read
    assert ListQuery(reverse=True).apply(rows, str, sorts) == list(reversed(rows))
    assert "1 of 3" in ListQuery("odd").describe(sorts, 1, 3).plain and ListQuery().describe(sorts, 3, 3).plain == ""


def test_command_resolution():
    assert resolve(":pods") == "pods" and resolve("q") == "quit" and resolve("ps") == "procs" and resolve("hist") == "history"
    assert resolve("pro") is None and resolve("proc") == "procs" and resolve("frobnicate") is None and resolve("") is None
    assert completions("pro") == ["procs", "problems"]


def test_slices_narrower_than_the_cadence_hold_the_last_reading_but_a_real_gap_stays_blank():
    every_second = [(NOW - 10 + t, 50.0) for t in range(0, 6)]  # readings at -10 … -5 s, then the source stopped
    cells = buckets(every_second, NOW, 10.0, 40)  # 0.25 s a slice: three of every four slices have no reading of their own
    assert cells[:33] == [50.0] * 33  # steady while it read, and held up to 3 s after its last reading (-5 s)
    assert cells[33:] == [None] * 7  # from -1.75 s: a real gap, blank
