"""scripts/test.py: which arguments run the suite in phases, that the phases select every test exactly
once, and the summary line it closes with."""

from __future__ import annotations

import itertools

import pytest

from scripts import test as command


@pytest.mark.parametrize("args", [[], ["-q"], ["--require-services", "-q"], ["-x", "-p", "no:cacheprovider"],
                                  ["-n", "2", "--dist", "loadgroup"], ["--durations", "20"], ["-c", "pyproject.toml"]])
def test_the_whole_suite_runs_in_phases(args):
    assert not command.selects(args)


@pytest.mark.parametrize("args", [["-m", "real_engine"], ["-mstatic"], ["-k", "pod"], ["tests/cli"],
                                  ["tests/rig/test_test_command.py::test_the_whole_suite_runs_in_phases"],
                                  ["-q", "--lf"], ["--version"], ["--deselect=tests/cli"]])
def test_a_selection_is_one_plain_pytest_run(args):
    assert command.selects(args)


def test_the_phases_select_every_test_exactly_once():
    markers = ("static", "real_engine")
    for values in itertools.product((False, True), repeat=len(markers)):
        marks = dict(zip(markers, values, strict=True))
        chosen = [phase.name for phase in command.PHASES if eval(phase.marker, {}, marks)]  # noqa: S307 - our own constant
        assert len(chosen) == 1, f"a test marked {marks} runs in {chosen or 'no phase'}"
    assert [phase.engines for phase in command.PHASES] == [False, False, True]  # only the last waits for the build


def test_the_closing_line_counts_like_pytest():
    counts = {"passed": 1577, "failed": 2, "error": 1, "skipped": 3, "deselected": 900, "warnings": 1}
    assert command.counts_text(counts) == "2 failed, 1577 passed, 3 skipped, 1 warning, 1 error"
    assert command.counts_text({"passed": 5, "error": 2, "warnings": 4}) == "5 passed, 4 warnings, 2 errors"
    assert command.counts_text({"deselected": 3}) == "no tests ran"


def test_the_tests_needing_no_engine_run_on_a_worker_per_core_plus_one(monkeypatch):
    monkeypatch.delenv("C3_TEST_WORKERS", raising=False)
    monkeypatch.setattr(command.os, "cpu_count", lambda: 2)
    assert command.workers() == 3 and command._xdist(3) == ("-n", "3", "--dist", "loadgroup")
    monkeypatch.setattr(command.os, "cpu_count", lambda: 1)
    assert command.workers() == 1
    monkeypatch.setattr(command.os, "cpu_count", lambda: 64)
    assert command.workers() == 4
    monkeypatch.setenv("C3_TEST_WORKERS", "1")
    assert command.workers() == 1 and command._xdist(1) == ()  # one process: no xdist at all
    phases = {phase.name: phase for phase in command.PHASES}
    assert phases["static checks"].xdist_args == ()
    # The real-engine tier: at most two workers (each engine computes on one thread), fewer when the box has fewer.
    assert phases["real_engine tier"].xdist_args in ((), ("-n", "2", "--dist", "loadgroup"))
    assert command.tier_workers(64) == 2 and command.tier_workers(1) == 1
