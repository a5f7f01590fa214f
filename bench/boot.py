#!/usr/bin/env python3
"""Boot timing: 4 stub pods booted one after another vs in parallel, and container start → placement verdict.

    python bench/boot.py [--runtime sim|docker] [--runs 3] [--delay 3] [--image c3-stub:test]

`sim` (default) runs the stub engine as local processes on a simulated 4-GPU rig; `docker` runs the
stub image (scripts/rig/image.py builds it) as containers pinned in `env` mode, and uses whatever GPU
probe the environment gives (C3_RIG, or the fake NVML on LD_LIBRARY_PATH). Prints medians over the runs.
Goal: parallel wall time ≤ 1.3 × the slowest single boot.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402


def setup(tmp: Path, args: argparse.Namespace) -> list:
    os.environ["C3_HOME"] = str(tmp / "home")
    os.environ["C3_STATE"] = str(tmp / "state")
    (tmp / "home" / "catalog.d").mkdir(parents=True)
    if args.runtime == "docker":
        os.environ["C3_RUNTIME"] = "docker"
        os.environ.setdefault("C3_GPU_MODE", "env")
        os.environ["HF_HOME"] = str(tmp / "hf")
        prepare_docker(tmp, args)
    command = ["python3", "/opt/c3/stub_engine.py", "--startup-delay", str(args.delay), "--port", "8000"]
    entry = {"slug": "custom/bench-stub", "engine": "custom", "image": args.image, "command": command, "container_port": 8000, "health_path": "/v1/models", "tp": 1}
    (tmp / "home" / "catalog.d" / "bench.yaml").write_text(yaml.safe_dump({"entries": [entry]}))
    if args.runtime == "sim":
        rig = tmp / "rig.yaml"
        rig.write_text(yaml.safe_dump({"gpus": [{"name": "NVIDIA GeForce RTX 3090", "total_mib": 24576, "sm": "8.6"}] * 4}))
        os.environ["C3_RIG"] = str(rig)
        os.environ["C3_RUNTIME"] = "sim"
    from backend.models import Pod
    from tests.runtime.helpers import free_port

    return [Pod(name=f"bench{i}", slug="custom/bench-stub", gpus=(i,), port=free_port()) for i in range(4)]


def prepare_docker(tmp: Path, args: argparse.Namespace) -> None:
    """The stub image, and (unless real NVML answers) the test rig's fake NVML with 4 GPUs, preloaded."""
    import docker

    from scripts.rig.image import ensure_stub_image

    args.image = ensure_stub_image(docker.from_env(timeout=300), log=lambda line: print(line, file=sys.stderr))
    try:
        import pynvml

        pynvml.nvmlInit()
        return
    except Exception:
        pass
    from scripts.rig.fake_nvml import FakeGpu, FakeNvml, build_library, preload

    lib = build_library()
    fake = FakeNvml(lib, tmp / "nvml")
    fake.set_gpus([FakeGpu() for _ in range(4)])
    for key, value in fake.env().items():
        if key in ("C3_FAKE_NVML_STATE", "C3_GPU_REGISTRY", "LD_LIBRARY_PATH"):
            os.environ[key] = value
    preload(lib)


def down_all(ctx, pods) -> None:
    for pod in pods:
        ctx.runtime.stop(pod.name, timeout=5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", choices=["sim", "docker"], default="sim")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--delay", type=float, default=3.0, help="stub start-up delay, seconds")
    parser.add_argument("--image", default="c3-stub:test")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="c3-bench-") as tmp:
        pods = setup(Path(tmp), args)
        from backend.runtime.boot import boot_many, boot_pod
        from backend.wiring import open_context

        ctx = open_context()
        rows = {"slowest_single": [], "serial": [], "parallel": [], "placement": [], "after_ready": []}
        try:
            for run in range(args.runs):
                singles = []
                t0 = time.monotonic()
                for pod in pods:
                    t = time.monotonic()
                    outcome = boot_pod(ctx, pod, timeout_s=120)
                    if not outcome.ok:
                        print(f"boot failed: {outcome.pod}: {outcome.detail}\n{outcome.log_tail}", file=sys.stderr)
                        return 1
                    singles.append(time.monotonic() - t)
                    if outcome.placement_s is not None:
                        rows["placement"].append(outcome.placement_s)
                        rows["after_ready"].append(outcome.verdict_after_ready_s)
                serial = time.monotonic() - t0
                down_all(ctx, pods)
                t0 = time.monotonic()
                outcomes = boot_many(ctx, pods, timeout_s=120)
                parallel = time.monotonic() - t0
                if not all(o.ok for o in outcomes):
                    print("parallel boot failed: " + "; ".join(f"{o.pod}: {o.detail}" for o in outcomes if not o.ok), file=sys.stderr)
                    return 1
                rows["placement"] += [o.placement_s for o in outcomes if o.placement_s is not None]
                rows["after_ready"] += [o.verdict_after_ready_s for o in outcomes if o.verdict_after_ready_s is not None]
                verdicts = {o.placement.verdict for o in outcomes if o.placement}
                down_all(ctx, pods)
                rows["slowest_single"].append(max(singles))
                rows["serial"].append(serial)
                rows["parallel"].append(parallel)
                print(f"run {run + 1}: slowest single {max(singles):.2f} s, serial {serial:.2f} s, parallel {parallel:.2f} s, placement verdicts {sorted(verdicts)}")
        finally:
            down_all(ctx, pods)
        med = {k: statistics.median(v) if v else float("nan") for k, v in rows.items()}
        print(f"\nruntime={args.runtime} pods=4 stub start-up delay={args.delay:g} s runs={args.runs} (medians)")
        print(f"  slowest single boot      {med['slowest_single']:6.2f} s")
        print(f"  serial, 4 pods           {med['serial']:6.2f} s")
        print(f"  parallel, 4 pods         {med['parallel']:6.2f} s   = {med['parallel'] / med['slowest_single']:.2f} × slowest single (goal ≤ 1.30)")
        print(f"  start → placement verdict {med['placement']:5.2f} s   (n={len(rows['placement'])}; includes the {args.delay:g} s engine start-up)")
        print(f"  serving → placement verdict {med['after_ready'] * 1000:5.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
