#!/usr/bin/env python3
"""Swap-in time and requests held per swap: the gateway over three real llama-server pods in a Docker memory
budget that holds two (issue 28).

    flock /tmp/c3-heavy.lock .venv/bin/python bench/gateway_swap.py [--rounds 3]

Runs tests/real_engine/test_gateway_budget_real_llama.py: its scripted mix is 2 warm-up waves, then 6 waves a
round (5 swaps in the first round, 4 in each after: its first wave finds its pod running); `big.gguf`
(~245 MB F16), one thread per engine; its assertions (0 OOM kills, 0 failed requests, every swap the
fit's) hold for every round. It reports from what it records per swap: `took` (the
gateway's SwapRecord: stop the holder + `pod up` of the new pod, to serving and its placement verdict),
`serving` (the same up to the engine's first healthy answer, before the placement verdict), `stop`, and the
requests held for the pod while it was swapped in. Prints the load average before and after: the machine
is shared; the figures are wall-clock.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST = "tests/real_engine/test_gateway_budget_real_llama.py"


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile (few samples: no interpolation between them)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the mix (5 swaps, then 4 each)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="c3-bench-swap-") as tmp:
        out = Path(tmp) / "swaps.json"
        env = {**os.environ, "C3_GATEWAY_SWAP_ROUNDS": str(args.rounds), "C3_GATEWAY_SWAP_OUT": str(out)}
        load_before = os.getloadavg()
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-s", TEST], cwd=ROOT, env=env,
                             capture_output=True, text=True)
        load_after = os.getloadavg()
        if run.returncode != 0 or not out.exists():
            print(run.stdout[-4000:] + run.stderr[-2000:], file=sys.stderr)
            print(f"bench: the test failed (exit {run.returncode})", file=sys.stderr)
            return 1
        data = json.loads(out.read_text())
    swaps = data["swaps"]
    print(f"{data['rounds']} round(s): {data['requests']} requests, {len(swaps)} swaps, 0 OOM kills, 0 failed; budget {data['budget_mib']} MiB "
          f"(2 × the fit's {data['pod_mib']} MiB per pod); peak per pod {', '.join(f'{k} {v:.0f}' for k, v in sorted(data['peak_mib'].items()))} MiB; "
          f"negative control: {len(data['negative_control_killed'])} of 3 OOM-killed")
    for key, label in (("took_s", "swap-in (stop + up, to placement verdict)"), ("serving_s", "swap-in to serving"), ("stop_s", "stop of the holder")):
        values = [s[key] for s in swaps]
        print(f"{label:42} p50 {pct(values, 50):5.1f} s  p90 {pct(values, 90):5.1f} s  (n={len(values)})")
    held = [s["held"] for s in swaps]
    print(f"{'requests held per swap':42} mean {sum(held) / len(held):.1f}  max {max(held)}  total {sum(held)}")
    print(f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f} (1-min); {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
