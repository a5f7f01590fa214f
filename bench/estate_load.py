"""Reading a large estate: c3's strict reader (libyaml events) against PyYAML's loaders, and the whole
`c3 pod list` against the previous release's code path (PyYAML's pure-Python safe_load).

    python bench/estate_load.py [--pods 40000] [--runs 5]

Prints CPU seconds (process time: less sensitive than wall time to the other tenants of a shared
machine) and peak RSS, medians of `--runs`, and the load average at the start. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def estate_text(pods: int) -> str:
    lines = ["schema_version: 1", "estate:"]
    for i in range(pods):
        lines += [f"- name: p{i}", "  slug: vllm/qwen3-8b", f"  gpus: [{i % 8}]", f"  port: {1024 + i % 64000}"]
    return "\n".join(lines) + "\n"


def _child(kind: str, path: str) -> None:
    """Runs in a fresh interpreter: parse once, print CPU seconds and peak RSS (MiB)."""
    import yaml

    from backend import strict_yaml

    text = Path(path).read_text()
    start = time.process_time()
    if kind == "strict":
        strict_yaml.parse(text)
    elif kind == "csafe":
        yaml.load(text, Loader=yaml.CSafeLoader)
    else:
        yaml.safe_load(text)
    print(time.process_time() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def measure(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """CPU seconds (user + sys) and peak RSS in MiB of one command (wait4: that child's own usage)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, env=env, cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv} exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=40_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--old-tree", default=None, help="a checkout of the previous release, for the whole-command comparison")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}; {args.pods:,} pods; medians of {args.runs}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "estate.yml"
        path.write_text(estate_text(args.pods))
        print(f"file: {path.stat().st_size / 1e6:.1f} MB")
        rows = []
        for kind, label in (("strict", "c3 strict reader (libyaml events)"), ("csafe", "PyYAML CSafeLoader"), ("safe", "PyYAML safe_load (pure Python)")):
            cpu, rss = [], []
            for _ in range(args.runs):
                out = subprocess.run([sys.executable, __file__, "--child", kind, str(path)], check=True, capture_output=True, text=True).stdout.split()
                cpu.append(float(out[0]))
                rss.append(float(out[1]))
            rows.append((label, statistics.median(cpu), statistics.median(rss)))
        base = rows[0][1]
        print(f"{'parser':<36} {'CPU s':>8} {'× c3':>6} {'peak RSS MiB':>13}")
        for label, cpu, rss in rows:
            print(f"{label:<36} {cpu:>8.2f} {cpu / base:>6.1f} {rss:>13.0f}")
        env = dict(os.environ, C3_HOME=tmp, C3_STATE=tmp)
        c3 = [sys.executable, "-m", "c3", "pod", "list", "--file", str(path)]
        # cwd is the temp folder: `python -m c3` puts the cwd first on sys.path.
        runs = [measure(c3, dict(env, PYTHONPATH=str(ROOT)), tmp) for _ in range(args.runs)]
        print(f"{'c3 pod list (this tree)':<36} {statistics.median(r[0] for r in runs):>8.2f} {'':>6} {statistics.median(r[1] for r in runs):>13.0f}")
        if args.old_tree:
            old = [measure(c3, dict(env, PYTHONPATH=args.old_tree), tmp) for _ in range(args.runs)]
            print(f"{'c3 pod list (--old-tree)':<36} {statistics.median(r[0] for r in old):>8.2f} {'':>6} {statistics.median(r[1] for r in old):>13.0f}")


if __name__ == "__main__":
    main()
