"""Every `c3` command and sub-command, run with wrong input of every kind.

The contract (issue 2): one `c3: error: …` line (plus an optional `hint: …`), exit 0/1/2/3, nothing
written under C3_HOME by a failing command, never a traceback. The cases come from the click tree
itself (tests/cli/cases.py), so a command added later is swept without anyone listing it.

Each case is its own test and runs its own invocation under its own deadline, so a failure or a
timeout names the exact invocation and nothing else. Most cases run in a child forked from one
warm interpreter (tests/cli/forkserver.py, ~0.1 CPU-s each); every command's `--help` runs as a real
process through the console script (tests/cli/test_forkserver.py proves both paths judge alike).
"""

from __future__ import annotations

import pytest

from tests.cli.cases import all_cases
from tests.cli.harness import fresh_dirs, run_c3
from tests.cli.runner import judge, run_case

# Problems in areas still being worked on: routed to their owners, kept here so the sweep stays
# green and turns red (strict) the moment one is fixed without updating this table.
KNOWN: dict[str, str] = {}

CASES = all_cases()


def _param(case):
    marks = [pytest.mark.xfail(strict=True, reason=KNOWN[case.id])] if case.id in KNOWN else []
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_keeps_the_cli_contract(case, tmp_path):
    outcome = run_case(case, tmp_path)
    problems = judge(case, outcome)
    assert not problems, "; ".join(problems) + "\n" + outcome.describe()


def test_the_sweep_reaches_every_command():
    """A command whose cases all end in `no such command` would be swept for nothing."""
    from tests.cli.harness import leaf_commands

    paths = {" ".join(path) for path, _ in leaf_commands()}
    assert {"gpus kill", "catalog", "fit", "pod create", "pod list", "pod rm", "pod validate"} <= paths
    swept = {case.id.split(" :: ")[0] for case in CASES}
    assert paths <= swept, paths - swept
    real = {case.id.split(" :: ")[0] for case in CASES if case.real}
    assert paths | {"c3"} <= real, f"commands with no run through the console script: {paths - real}"


@pytest.mark.parametrize("real", [True, False], ids=["process", "fork"])
def test_help_cases_really_print_help(tmp_path, real):
    """The harness itself, both ways: `--help` is exit 0 with a usage line and an unknown command is
    not, so a runner that loses the output or the exit code cannot pass."""
    dirs = fresh_dirs(tmp_path / "home")
    helped = run_c3(["pod", "create", "--help"], dirs, real=real)
    assert helped.rc == 0 and "Usage: c3 pod create" in helped.stdout and not helped.stderr, helped.describe()
    refused = run_c3(["no-such-command"], dirs, real=real)
    assert refused.rc == 2 and refused.stderr.startswith("c3: error: No such command") and not refused.stdout, refused.describe()
