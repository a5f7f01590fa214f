"""Run every sweep case both ways — forked from the warm interpreter and as a real `c3` process —
and compare the verdicts (issue 22: the fork path must catch what the process path catches).

    .venv/bin/python -m tests.cli.compare_paths [--limit N] [--match TEXT]

Prints the number of cases, passes and failures each way, the wall and CPU time each way, and
every case whose verdict, exit code or output differs; exits 1 if a verdict or exit code differs.
Slow (every case as a real process): run it when the fork server or the harness changes.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from tests.cli.cases import all_cases
from tests.cli.harness import FORKS
from tests.cli.runner import judge, run_cases


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=0, help="only the first N cases")
    parser.add_argument("--match", default="", help="only cases whose id contains this")
    args = parser.parse_args()
    cases = [c for c in all_cases() if args.match in c.id]
    cases = cases[: args.limit] if args.limit else cases
    root = Path(tempfile.mkdtemp(prefix="c3-compare-"))
    results = {}
    for way, real in (("fork", False), ("process", True)):
        wall, cpu = time.monotonic(), _cpu()
        outcomes = run_cases(cases, root / way, real=real)
        # The forks are the server's children, not ours: stopping it folds their CPU (and its own) into ours.
        FORKS.close()
        results[way] = (outcomes, time.monotonic() - wall, _cpu() - cpu)
    print(f"{len(cases)} cases, load average {os.getloadavg()}")
    verdict_diffs = output_diffs = 0
    for way, (outcomes, wall, cpu) in results.items():
        failed = [c.id for c in cases if judge(c, outcomes[c.id])]
        print(f"{way:8} passed {len(cases) - len(failed)}, failed {len(failed)}; wall {wall:.1f}s, cpu (this process + children) {cpu:.1f}s")
        for case_id in failed:
            print(f"   failed: {case_id}: {'; '.join(judge(next(c for c in cases if c.id == case_id), outcomes[case_id]))}")
    forked, real_ = results["fork"][0], results["process"][0]
    case_dir = re.compile(re.escape(str(root)) + r"/(fork|process)/case\d+")  # each case's own home shows in messages

    def seen(outcome):
        return case_dir.sub("<case>", outcome.stdout), case_dir.sub("<case>", outcome.stderr), outcome.changed

    for case in cases:
        f, p = forked[case.id], real_[case.id]
        if judge(case, f) != judge(case, p) or f.rc != p.rc:
            verdict_diffs += 1
            print(f"VERDICT DIFFERS {case.id}\n  fork:    {judge(case, f)}\n{f.describe()}\n  process: {judge(case, p)}\n{p.describe()}")
        elif seen(f) != seen(p):
            output_diffs += 1
            print(f"output differs (same verdict) {case.id}\n  fork:\n{f.describe()}\n  process:\n{p.describe()}")
    print(f"verdicts or exit codes differ: {verdict_diffs}; same verdict, other output: {output_diffs}")
    return 1 if verdict_diffs else 0


if __name__ == "__main__":
    sys.exit(main())
