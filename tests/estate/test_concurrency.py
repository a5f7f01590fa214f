"""Several `c3 pod create` processes at once never lose a pod that was reported created.

Real processes (the installed console script) against one estate file on an 8-GPU simulated rig;
the advisory lock serialises their read-validate-write.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from backend.estate import load_estate
from tests.estate.cli import C3_BIN, RIG_8

N = 8


def _spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([str(C3_BIN), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _finish(procs: list[subprocess.Popen], deadline_s: float = 180) -> list[tuple[int, str, str]]:
    end = time.monotonic() + deadline_s
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=max(1.0, end - time.monotonic()))
            results.append((proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    rig = tmp_path / "rig8.yaml"
    rig.write_text(RIG_8)
    return {**os.environ, "C3_RIG": str(rig)}


def test_parallel_creates_on_distinct_gpus_all_land(tmp_path: Path, env):
    path = tmp_path / "estate.yml"
    procs = [
        _spawn(["pod", "create", f"p{i}", "--gpus", str(i), "--slug", "vllm/qwen3-8b", "--port", str(9100 + i), "--file", str(path)], env)
        for i in range(N)
    ]
    results = _finish(procs)
    created = {f"p{i}" for i, (code, _, _) in enumerate(results) if code == 0}
    for code, _out, err in results:
        assert "Traceback" not in err
        assert code in (0, 1), err
    names = {p.name for p in load_estate(path).pods}
    assert created <= names, f"reported created but lost: {created - names}"
    assert created == {f"p{i}" for i in range(N)}, [r[2] for r in results]


def test_parallel_creates_without_ports_get_distinct_ports(tmp_path: Path, env):
    path = tmp_path / "estate.yml"
    procs = [_spawn(["pod", "create", f"q{i}", "--gpus", str(i), "--slug", "vllm/qwen3-8b", "--file", str(path)], env) for i in range(N)]
    results = _finish(procs)
    assert all(code == 0 for code, _, _ in results), [err for _, _, err in results]
    pods = load_estate(path).pods
    assert len(pods) == N
    assert len({p.port for p in pods}) == N


def test_racing_for_one_gpu_exactly_one_wins(tmp_path: Path, env):
    path = tmp_path / "estate.yml"
    procs = [_spawn(["pod", "create", f"r{i}", "--gpus", "5", "--slug", "vllm/qwen3-8b", "--port", str(9200 + i), "--file", str(path)], env) for i in range(4)]
    results = _finish(procs)
    winners = [f"r{i}" for i, (code, _, _) in enumerate(results) if code == 0]
    losers = [err for code, _, err in results if code != 0]
    assert len(winners) == 1
    assert all("E1: GPU 5" in err and "claimed by" in err for err in losers), losers
    assert [p.name for p in load_estate(path).pods] == winners
