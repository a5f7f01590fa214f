"""What vLLM's CPU build needs across nodes, and the combinations it is known to die on.

Read from vLLM 0.32's source and checked by running it on GPU-less hosts (shared/docs/MULTINODE-ENGINE-NOTES.md):
- The CPU platform refuses Ray outright: `ValueError: current platform cpu does not support ray.`
  (`vllm/v1/executor/ray_utils.py`), so `--backend ray` can never serve on a CPU build.
- Pipeline parallel with `--enforce-eager` dies on the first request from 0.27 on: ranks ≥ 1 allocate their
  receive buffer only in the warm-up dummy run, which the CPU runner skips when compilation is off
  (`assert self.intermediate_tensors is not None`, then `EngineDeadError`). `-cc.mode=2 -cc.backend=eager`
  (trace once, no inductor compile) warms up and serves.
- `VLLM_CPU_OMP_THREADS_BIND=auto` (the default) asserts "Not enough allowed NUMA nodes" on small hosts;
  `nobind` lets the OS place the threads.

Pure functions: the pre-flight (`backend.shard.prepare`) hands the probed facts in.
"""

from __future__ import annotations

import re

from backend.errors import Refused
from backend.shard.models import NodeFacts

RAY_REFUSAL = "current platform cpu does not support ray."
"""vLLM's own words (`vllm/v1/executor/ray_utils.py`), quoted in the refusal."""

PP_EAGER_BROKEN_FROM = (0, 27)
"""First release whose CPU runner skips the warm-up that PP ranks ≥ 1 need when compilation is off."""

PP_COMPILE_ARGS = ("-cc.mode=2", "-cc.backend=eager")
"""What c3 adds for PP on a CPU build when the profile sets no compilation of its own."""

CPU_ENV = {"VLLM_CPU_OMP_THREADS_BIND": "nobind"}
"""Environment every CPU rank gets unless the profile sets it."""

_COMPILE_FLAGS = ("-cc", "-O", "--compilation-config", "--compilation_config")


def is_cpu_build(version: str | None) -> bool:
    """vLLM built for CPU: its version carries the `+cpu` local label (`0.32.0+cpu`); the probe adds it
    for the `vllm-cpu` distribution too."""
    if not version:
        return False
    _, plus, local = version.partition("+")
    return bool(plus) and "cpu" in re.split(r"[.\-_]", local.lower())


def release(version: str) -> tuple[int, int] | None:
    """(major, minor) of a version string, or None when it has none."""
    match = re.match(r"\s*v?(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def cpu_nodes(facts: dict[str, NodeFacts]) -> list[str]:
    """Nodes whose vLLM is a CPU build, in the facts' order."""
    return [name for name, f in facts.items() if is_cpu_build(f.vllm_version)]


def _sets_compilation(args: list[str]) -> bool:
    return any(a == flag or a.startswith(flag + ".") or a.startswith(flag + "=") for a in args for flag in _COMPILE_FLAGS)


def check(backend: str, pp: int, args: list[str], facts: dict[str, NodeFacts]) -> None:
    """Refuse what a CPU build cannot run, before anything starts."""
    cpu = cpu_nodes(facts)
    if not cpu:
        return
    version = facts[cpu[0]].vllm_version or "?"
    if backend == "ray":
        raise Refused(
            f"vLLM {version} on {', '.join(cpu)} is a CPU build, and vLLM's CPU platform cannot run on Ray "
            f"(vLLM: \"{RAY_REFUSAL}\", vllm/v1/executor/ray_utils.py)",
            hint="use --backend mp (vLLM's own executor across nodes, over gloo/TCP) or --backend rpc (llama.cpp)",
        )
    broken = (r := release(version)) is not None and r >= PP_EAGER_BROKEN_FROM
    if backend == "mp" and pp > 1 and "--enforce-eager" in args and broken:
        raise Refused(
            f"vLLM {version} (CPU build) with pipeline parallel and --enforce-eager dies on its first request "
            "(`assert self.intermediate_tensors is not None` on the rank ≥ 1 worker: vLLM 0.27 and later skip the "
            "warm-up those ranks need when compilation is off)",
            hint="drop --enforce-eager: c3 then passes " + " ".join(PP_COMPILE_ARGS) + " (traced once, no inductor compile)",
        )


def adjust(backend: str, pp: int, args: list[str], env: dict[str, str], facts: dict[str, NodeFacts]) -> tuple[list[str], dict[str, str], list[str]]:
    """(args, env, notes): what a CPU build needs added to an mp shard, and one line per addition for the plan."""
    if backend != "mp" or not cpu_nodes(facts):
        return args, env, []
    notes: list[str] = []
    new_env = dict(env)
    for name, value in CPU_ENV.items():
        if name not in env:
            new_env[name] = value
            notes.append(f"vLLM CPU build: {name}={value} (the default binding asserts on hosts with few NUMA nodes)")
    new_args = list(args)
    if pp > 1 and "--enforce-eager" not in args and not _sets_compilation(args):
        new_args += PP_COMPILE_ARGS
        notes.append("vLLM CPU build with pipeline parallel: " + " ".join(PP_COMPILE_ARGS)
                     + " (the warm-up that ranks ≥ 1 need, without an inductor compile)")
    return new_args, new_env, notes
