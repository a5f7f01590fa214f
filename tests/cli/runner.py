"""Run sweep cases (each in its own fresh home) and keep their outcomes."""

from __future__ import annotations

import itertools
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.cli.cases import BROKEN_HOMES, Case
from tests.cli.harness import Outcome, base_env, contract_problems, fresh_dirs, run_c3

WORKERS = max(2, min(6, (os.cpu_count() or 2) * 2))
# Per case, sized for a busy 2-core box: a fork costs ~0.1 CPU-s, a real process ~1 CPU-s.
DEADLINE_S = 60.0
_counter = itertools.count()


def prepare(case: Case, base: Path) -> dict[str, Path]:
    dirs = fresh_dirs(base)
    for rel, content in BROKEN_HOMES.get(case.variant, {}).items():
        target = dirs["home"] / rel
        if content is None:
            target.unlink(missing_ok=True)
            continue
        if target.parent.is_file():
            target.parent.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return dirs


def run_case(case: Case, root: Path, *, real: bool | None = None) -> Outcome:
    """One case in a fresh home under `root`; `real` overrides the case's own choice of path."""
    dirs = prepare(case, root / f"case{next(_counter)}")
    env = base_env(dirs, rig=case.rig, extra=dict(case.extra_env))
    return run_c3(list(case.argv), dirs, env=env, timeout=DEADLINE_S, real=case.real if real is None else real)


def judge(case: Case, outcome: Outcome) -> list[str]:
    """The sweep's verdict on one case's outcome (empty: it keeps the contract)."""
    problems = contract_problems(outcome, may_write=case.may_write and outcome.rc == 0, group_help_ok=case.id.endswith(":: no args"))
    if case.id.endswith(":: --help") and not (outcome.rc == 0 and "Usage:" in outcome.stdout):
        problems.append("--help did not print a usage")
    return problems


def run_cases(cases: list[Case], root: Path, *, real: bool | None = None) -> dict[str, Outcome]:
    """Many cases concurrently (tests/cli/compare_paths.py); the sweep runs one case per test."""
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        outcomes = list(pool.map(lambda c: run_case(c, root, real=real), cases))
    return {case.id: outcome for case, outcome in zip(cases, outcomes, strict=True)}
