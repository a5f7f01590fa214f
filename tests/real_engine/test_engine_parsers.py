"""Every command line c3 renders meets the real engine's own argument parser.

vLLM: the `vllm serve` parser of vLLM 0.32 (CPU build), built exactly as the `vllm` CLI builds it, plus
the serve command's own validation (scripts/rig/vllm_argcheck.py, run in the vLLM venv). vLLM's parser is
the same Python code in the CPU and CUDA builds; a flag the CPU build lacks would fail here by name.

llama.cpp: the built `llama-server` with the rendered arguments and `--help` appended. llama.cpp parses
every argument (running each one's handler, so values are checked too) before it acts on `--help`; the
server defers model loading and `-hf` downloads until after parsing, so this is a parse-only run.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from scripts.rig.real_engines import OFFLINE_ENV
from tests.real_engine.commands import slug_commands, vllm_commands

pytestmark = pytest.mark.real_engine

VLLM = vllm_commands()
LLAMA = slug_commands("llamacpp")
# Controls: each must be refused, or the check cannot tell a drifted flag from an accepted one.
VLLM_BAD = {"control:unknown-flag": ["vllm", "serve", "m", "--no-such-flag-c3", "1"],
            "control:bad-choice": ["vllm", "serve", "m", "--kv-cache-dtype", "fp7"],
            "control:bad-type": ["vllm", "serve", "m", "--max-num-seqs", "many"]}


def run_vllm_parser(python, commands: dict[str, list[str]]) -> dict[str, dict]:
    items = [{"name": name, "argv": argv} for name, argv in commands.items()]
    result = subprocess.run([str(python), "scripts/rig/vllm_argcheck.py"], input=json.dumps(items), text=True,
                            capture_output=True, timeout=240, env={**OFFLINE_ENV, "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def vllm_verdicts(real_engines) -> dict[str, dict]:
    return run_vllm_parser(real_engines.vllm_python, {**VLLM, **VLLM_BAD})


def test_every_vllm_source_is_covered():
    """The set under test is not empty by accident: slugs, the recipe's ranks and the shard lines."""
    assert sum(name.startswith("vllm/") for name in VLLM) >= 20
    assert any(name.startswith("recipe:") for name in VLLM)
    assert {"shard:mp:rank0", "shard:mp:rank1", "shard:ray"} <= set(VLLM)


@pytest.mark.parametrize("name", sorted(VLLM))
def test_vllm_parser_accepts(vllm_verdicts, name):
    verdict = vllm_verdicts[name]
    assert verdict["ok"], f"{name}: vLLM 0.32 refuses `{' '.join(VLLM[name])}` at {verdict['stage']}: {verdict['error']}"


@pytest.mark.parametrize("name", sorted(VLLM_BAD))
def test_vllm_parser_refuses_controls(vllm_verdicts, name):
    verdict = vllm_verdicts[name]
    assert not verdict["ok"] and verdict["stage"] == "parse", verdict


def llama_parse(server, argv: list[str]) -> subprocess.CompletedProcess:
    """Run the real llama-server over `argv` (its program name replaced) plus `--help`."""
    return subprocess.run([str(server), *argv[1:], "--help"], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})


@pytest.mark.parametrize("slug", sorted(LLAMA))
def test_llama_server_accepts(real_engines, slug):
    result = llama_parse(real_engines.llama_server, LLAMA[slug])
    assert result.returncode == 0, f"{slug}: llama-server refuses `{' '.join(LLAMA[slug])}`: {result.stderr.strip()[-800:]}"
    assert "----- common params -----" in result.stdout + result.stderr  # it really got to the usage text


@pytest.mark.parametrize("argv, message", [
    (["llama-server", "--no-such-flag-c3"], "invalid argument: --no-such-flag-c3"),
    (["llama-server", "-ctk", "f7"], "error while handling argument \"-ctk\""),
])
def test_llama_server_refuses_controls(real_engines, argv, message):
    result = llama_parse(real_engines.llama_server, argv)
    assert result.returncode != 0 and message in result.stderr, result.stderr[-800:]
