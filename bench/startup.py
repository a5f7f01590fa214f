"""What the commands people type most cost to start: CPU seconds of `c3 --help`, `c3 pod list`, `c3 fit`
(issue 22's goal: ≤ 0.15 CPU-s each), against `python -c pass`, the floor of this interpreter, and
against defining and validating one pydantic model, the floor of any command that reads data.

    .venv/bin/python bench/startup.py [--runs 10] [--rig demo|''] [--old-tree PATH]

Each command runs `--runs` times in a fresh process (the console script next to this interpreter),
round-robin so a burst of load on a shared machine hits every command alike. CPU time is user + sys
from getrusage(RUSAGE_CHILDREN) around each run: what the process itself burned, much less sensitive
than wall time to the other tenants of the machine. The home is a throw-away C3_HOME holding a
one-pod estate; `--rig demo` (the default) gives `c3 fit … --gpus 0` the built-in simulated rig to
price on, `--rig ''` uses the real NVML probe (without a GPU, fit then exits 3 and is still timed).

`--old-tree PATH` (e.g. a `git archive` of the previous commit) also runs every command from that
tree (first on PYTHONPATH), interleaved with this one's, so both meet the same load.

Before timing, each command runs once untimed with PYTHONDONTWRITEBYTECODE unset, so the .pyc files
exist as they do in an installed copy (with them absent every run compiles c3's modules again, which
costs more than the rest of `c3 pod list`). Prints median / min / max per command and the load
average before and after. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

GOAL_CPU_S = 0.15
ROOT = Path(__file__).resolve().parents[1]
ESTATE = "schema_version: 1\nestate:\n- name: chat\n  slug: vllm/qwen3-8b\n  gpus: [0]\n  port: 8020\n"


def commands(python: str, c3: str) -> list[tuple[str, list[str]]]:
    return [
        ("python -c pass (floor)", [python, "-c", "pass"]),
        # What any command that validates a pydantic model pays first (pydantic-core, pydantic, its plugin lookup).
        ("python + one pydantic model", [python, "-c", "from pydantic import BaseModel\nclass M(BaseModel):\n    x: int = 0\nM(x=1)"]),
        ("c3 --help", [c3, "--help"]),
        ("c3 pod list", [c3, "pod", "list"]),
        ("c3 fit vllm/qwen3-8b --gpus 0", [c3, "fit", "vllm/qwen3-8b", "--gpus", "0"]),
        ("c3 fit --help", [c3, "fit", "--help"]),
    ]


def cpu_seconds(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """User + sys CPU seconds of one run (the children's rusage before and after it) and its exit code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    code = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False).returncode
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="runs per command (default 10)")
    parser.add_argument("--rig", default="demo", help="C3_RIG for the runs: `demo` (default) or '' for the real NVML probe")
    parser.add_argument("--old-tree", default=None, help="another checkout of c3 to time alongside this one")
    args = parser.parse_args()
    python = sys.executable
    c3 = str(Path(python).with_name("c3"))
    trees = [("", str(ROOT))] + ([(" [old tree]", str(Path(args.old_tree).resolve()))] if args.old_tree else [])
    with tempfile.TemporaryDirectory(prefix="c3-startup-") as tmp:
        home = Path(tmp, "home")
        home.mkdir()
        (home / "estate.yml").write_text(ESTATE, encoding="utf-8")
        base = {**os.environ, "C3_HOME": str(home), "C3_STATE": str(Path(tmp, "state")), "C3_RIG": args.rig}
        # cwd stays where it is; each tree goes first on sys.path (ahead of the editable install's finder).
        todo = [(name + suffix, argv, {**base, "PYTHONPATH": tree}) for suffix, tree in trees for name, argv in commands(python, c3)]
        for _, argv, env in todo:
            subprocess.run(argv, env={k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        samples: dict[str, list[float]] = {name: [] for name, _, _ in todo}
        codes: dict[str, set[int]] = {name: set() for name, _, _ in todo}
        load_before = os.getloadavg()
        for _ in range(args.runs):
            for name, argv, env in todo:
                seconds, code = cpu_seconds(argv, env)
                samples[name].append(seconds)
                codes[name].add(code)
        load_after = os.getloadavg()
    print(f"Python {sys.version.split()[0]} at {python}; {args.runs} runs each; C3_RIG={args.rig!r}; {os.cpu_count()} CPUs")
    print(f"load average before {load_before[0]:.1f} / after {load_after[0]:.1f} (1 min)")
    print(f"{'command':<46}{'median':>8}{'min':>8}{'max':>8}  exit  goal ≤ {GOAL_CPU_S} CPU-s")
    for name, values in samples.items():
        median = statistics.median(values)
        verdict = "" if name.startswith("python") else ("met" if median <= GOAL_CPU_S else f"over by {median - GOAL_CPU_S:.2f}")
        exits = ",".join(str(c) for c in sorted(codes[name]))
        print(f"{name:<46}{median:>8.3f}{min(values):>8.3f}{max(values):>8.3f}  {exits:<4}  {verdict}")


if __name__ == "__main__":
    main()
