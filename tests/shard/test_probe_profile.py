"""Unit tests: the probe scripts (run for real with /bin/sh), their parsers, and `--profile`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend.cluster.netfacts import parse_interfaces, parse_route
from backend.errors import Refused, UsageError
from backend.shard import ray_cmds
from backend.shard.probe import facts_script, parse_facts
from backend.shard.profile import load_profile


def run_sh(script: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["/bin/sh", "-c", script], check=False, capture_output=True, text=True, timeout=60, env=env).stdout


def test_facts_probe_runs_and_reads_interpreter_from_ray_shebang(tmp_path: Path):
    fake_ray = tmp_path / "ray"
    fake_ray.write_text(f"#!{sys.executable}\nprint('ray, version 2.60.0')\n")
    fake_ray.chmod(0o755)
    out = run_sh(facts_script(ray=str(fake_ray), vllm="definitely-not-vllm-xyz", python=None, check_sudo=False))
    facts = parse_facts("a", out)
    assert facts.ray_path == str(fake_ray) and facts.ray_version == "2.60.0"
    assert facts.python_path == sys.executable
    assert facts.python_version == ".".join(str(v) for v in sys.version_info[:3])
    assert facts.vllm_path is None and facts.sudo_ok is None


def test_facts_probe_sudo_and_gpus_from_a_stand_in_nvidia_smi(tmp_path: Path):
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA GB10'\n")
    sudo = tmp_path / "sudo"
    sudo.write_text("#!/bin/sh\necho 'sudo: a password is required' >&2; exit 1\n")
    for f in (smi, sudo):
        f.chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path}:/usr/bin:/bin")
    facts = parse_facts("a", run_sh(facts_script(ray="ray-missing", vllm="vllm", python=None, check_sudo=True), env))
    assert facts.gpus == 1 and facts.gpu_names == ["NVIDIA GB10"]
    assert facts.ray_version is None
    assert facts.sudo_ok is False and facts.sudo_error == "sudo: a password is required"


def test_facts_probe_reads_vllm_version_from_its_interpreter_metadata(tmp_path: Path):
    site = tmp_path / "site"
    (site / "vllm-0.11.0.dist-info").mkdir(parents=True)
    (site / "vllm-0.11.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.11.0\n")
    vllm = tmp_path / "vllm"
    vllm.write_text(f"#!{sys.executable}\n")
    vllm.chmod(0o755)
    env = dict(os.environ, PYTHONPATH=str(site))
    facts = parse_facts("a", run_sh(facts_script(ray="ray-missing", vllm=str(vllm), python=None, check_sudo=False), env))
    assert facts.vllm_path == str(vllm) and facts.vllm_version == "0.11.0"
    plain = parse_facts("a", run_sh(facts_script(ray="ray-missing", vllm=str(vllm), python=None, check_sudo=False)))
    assert plain.vllm_version is None


def test_interfaces_parser_drops_loopback_and_reads_prefix():
    lines = [
        "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever",
        "2: enP7s7    inet 192.168.1.10/24 brd 192.168.1.255 scope global enP7s7\\ valid_lft 1",
        "7: c3v1i@if8    inet 10.213.1.2/24 scope global c3v1i\\ valid_lft forever",
    ]
    got = parse_interfaces(lines)
    assert [(i.name, i.address, i.prefix) for i in got] == [("enP7s7", "192.168.1.10", 24), ("c3v1i", "10.213.1.2", 24)]


def test_route_parser_cases():
    ok = parse_route("b", "route=192.168.100.10 dev enp1s0f1np1 src 192.168.100.11 uid 0 \\    cache\nconnect=ok\n")
    assert (ok.interface, ok.source, ok.connected, ok.error) == ("enp1s0f1np1", "192.168.100.11", True, None)
    none = parse_route("b", "route_error=RTNETLINK answers: Network is unreachable\nconnect=Network is unreachable\n")
    assert none.error == "no route (Network is unreachable)"
    refused = parse_route("b", "route=10.0.0.1 dev eth0 src 10.0.0.2 uid 0\nconnect=Connection refused\n")
    assert refused.error == "TCP connect failed: Connection refused" and refused.connected is False
    prohibited = parse_route("b", "route=prohibit 10.0.0.1 uid 0\n")
    assert prohibited.error is not None


def test_ray_status_parser():
    text = """======== Autoscaler status: 2026-11-29 18:30:00 ========
Node status
---------------------------------------------------------------
Active:
 1 node_5f3a
 1 node_9c1e
Pending:
 (no pending nodes)
Recent failures:
 (no failures)

Resources
---------------------------------------------------------------
Total Usage:
 0.0/4.0 CPU
 0.0/2.0 GPU
 0B/12.00GiB memory
"""
    assert ray_cmds.parse_status(text) == (2, 2.0)
    assert ray_cmds.parse_status("No cluster status.") == (0, None)


def test_profile_from_file_top_level_or_shard_section(tmp_path: Path):
    (tmp_path / "big.yaml").write_text("model: Qwen/Qwen3-235B\nargs: --max-model-len 32768\nenv: {NCCL_IB_DISABLE: 0}\ntp: 2\npp: 1\n")
    p = load_profile("big", tmp_path)
    assert (p.model, p.args, p.env, p.tp, p.pp) == ("Qwen/Qwen3-235B", ["--max-model-len", "32768"], {"NCCL_IB_DISABLE": "0"}, 2, 1)
    (tmp_path / "mixed.yaml").write_text("kind: recipe\nrecipe: r1\nmodel: served\nshard:\n  model: org/m\n  args: [--enforce-eager]\n  backend: mp\n")
    p = load_profile("mixed", tmp_path)
    assert (p.model, p.args, p.backend) == ("org/m", ["--enforce-eager"], "mp")


def test_profile_inline_model_args_and_refusals(tmp_path: Path):
    p = load_profile("Qwen/Qwen3-8B --max-model-len 4096", tmp_path)
    assert p.model == "Qwen/Qwen3-8B" and p.args == ["--max-model-len", "4096"]
    with pytest.raises(Refused, match="no profile `big`"):
        load_profile("big", tmp_path)
    (tmp_path / "recipe.yaml").write_text("kind: recipe\nrecipe: r1\nmodel: served\n")
    with pytest.raises(Refused, match="recipe profile"):
        load_profile("recipe", tmp_path)
    (tmp_path / "nomodel.yaml").write_text("tp: 2\n")
    with pytest.raises(Refused, match="no `model:`"):
        load_profile("nomodel", tmp_path)
    (tmp_path / "bad.yaml").write_text("model: m/x\ntp: zero\n")
    with pytest.raises(UsageError, match="tp"):
        load_profile("bad", tmp_path)
    with pytest.raises(UsageError):
        load_profile("  ", tmp_path)


def test_profile_text_that_is_not_a_command_line_is_a_clean_error(tmp_path):
    """An unbalanced quote or a name too long for the file system: one-line errors, never a traceback."""
    from backend.errors import Refused, UsageError
    from backend.shard.profile import load_profile

    for text, kind in (("'org/model --x", UsageError), ("x" * 400, Refused), ("x" * 400 + "/" + "y" * 300, None)):
        try:
            load_profile(text, directory=tmp_path)
        except (UsageError, Refused) as error:
            assert kind is not None and isinstance(error, kind), (text[:20], error)
            assert len(error.message) < 300
        else:
            assert kind is None  # an `ORG/MODEL` id is taken as given, however long
