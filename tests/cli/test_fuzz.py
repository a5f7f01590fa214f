"""Random command lines built from each command's real option names, run as real processes.

The fixed sweep (test_sweep.py) feeds one wrong value at a time; here Hypothesis combines real
options with random values, repeats, stray flags and positional junk, which is where option
interactions (a valid `--tp` with a junk `--pp`, two `--file`s, …) break. Bounded: a few batches
per command, each batch run concurrently, derandomized so a run is reproducible and CI-stable.

The home has no registered nodes, so nothing here can reach a node, start a router or a shard:
every `--nodes` value is refused before anything starts.
"""

from __future__ import annotations

import itertools
import os
from concurrent.futures import ThreadPoolExecutor

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli.cases import BLOCKING, PATH_JUNK, RECIPE, SLUG, guard
from tests.cli.harness import (
    base_env,
    contract_problems,
    fresh_dirs,
    leaf_commands,
    run_c3,
)

BATCH = 4
# 2 batches of 4 per command keeps the suite's budget; C3_CLI_FUZZ_EXAMPLES=20 for a deeper local hunt.
EXAMPLES = int(os.environ.get("C3_CLI_FUZZ_EXAMPLES", "2"))
# Argument lists that broke a command in an area still being worked on (shrunk by Hypothesis);
# see test_sweep.KNOWN for the routing of each.
KNOWN: dict[str, str] = {}

COMMANDS = [(path, cmd) for path, cmd in leaf_commands() if path not in BLOCKING]
_dirs = itertools.count()

# Junk the fixed sweep also uses, plus values that are valid somewhere (so the code behind click runs).
SEEDS = ["", "0", "1", "-1", "2", "65536", "1e9", "nan", "abc", "0,1", "0,0", "1,2,3", "ünï€ø", "a=b", "max_model_len=4096", SLUG, RECIPE,
         "chat", "nosuch", "rtx-3090", "http://127.0.0.1:9", "u@127.0.0.1:9", "x" * 300, *PATH_JUNK]
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=24)
VALUE = st.one_of(st.sampled_from(SEEDS), TEXT, st.integers(-(2**70), 2**70).map(str), st.floats(allow_nan=True).map(str))


def argv_strategy(cmd: click.Command) -> st.SearchStrategy[list[str]]:
    flags = [o for p in cmd.params if isinstance(p, click.Option) for o in p.opts + p.secondary_opts]
    takes_value = {o for p in cmd.params if isinstance(p, click.Option) and not (p.is_flag or p.count) for o in p.opts}
    positional = sum(1 for p in cmd.params if isinstance(p, click.Argument))

    @st.composite
    def build(draw) -> list[str]:
        argv: list[str] = []
        for _ in range(draw(st.integers(0, positional + 1))):
            argv.append(draw(VALUE.filter(lambda v: not v.startswith("-"))))
        for _ in range(draw(st.integers(0, 5))):
            if not flags:
                break
            flag = draw(st.sampled_from(flags))
            argv.append(flag)
            if flag in takes_value:
                argv.append(draw(VALUE))
        return draw(st.permutations(argv)) if draw(st.booleans()) else argv

    return build()


def _run(path: tuple[str, ...], argv: list[str], root) -> tuple[list[str], object]:
    dirs = fresh_dirs(root / f"f{next(_dirs)}")
    (dirs["home"] / "nodes.json").unlink()  # no registered node: nothing can be reached or started
    full = guard(path, [*path, *argv])
    return full, run_c3(full, dirs, env=base_env(dirs), timeout=60)


@pytest.mark.parametrize("path, cmd", [pytest.param(p, c, id=" ".join(p), marks=[pytest.mark.xfail(strict=True, reason=KNOWN[" ".join(p)])]
                                       if " ".join(p) in KNOWN else []) for p, c in COMMANDS])
@settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 2, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_random_command_lines_keep_the_contract(path, cmd, data, tmp_path_factory):
    batch = data.draw(st.lists(argv_strategy(cmd), min_size=BATCH, max_size=BATCH), label="argv batch")
    root = tmp_path_factory.mktemp("fuzz")
    with ThreadPoolExecutor(max_workers=BATCH) as pool:
        results = list(pool.map(lambda argv: _run(path, argv, root), batch))
    failures = []
    for _full, outcome in results:
        problems = contract_problems(outcome, may_write=outcome.rc == 0)
        if problems:
            failures.append("; ".join(problems) + "\n" + outcome.describe())
    assert not failures, "\n\n".join(failures)
