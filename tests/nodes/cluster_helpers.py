"""Shared helpers for the cluster integration tests: run `c3` as a user would, the test recipe."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.support import http_status, wait_until  # noqa: F401 - shared with the tests that import them from here

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-c3test-Zq81xVerySecretKey"
HF_SECRET = "hf_c3testTokenThatMustNotLeak"
PORT = 8123
ALT_PORT = 8124


@dataclass
class C3Runner:
    """Runs `python -m c3 …` in a subprocess and keeps every output for the secret scan."""

    outputs: list[str] = field(default_factory=list)

    def __call__(self, *args: str, timeout: float = 180, env: dict | None = None) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, **(env or {})}
        result = subprocess.run([sys.executable, "-m", "c3", *args], cwd=ROOT, env=full_env,
                                capture_output=True, text=True, timeout=timeout)
        self.outputs.append(result.stdout + result.stderr)
        return result

    def ok(self, *args: str, **kw) -> str:
        result = self(*args, **kw)
        assert result.returncode == 0, f"c3 {' '.join(args)} → {result.returncode}\n{result.stdout}\n{result.stderr}"
        return result.stdout

    def assert_no_secret(self) -> None:
        for text in self.outputs:
            assert SECRET not in text and HF_SECRET not in text


def stub_recipe(recipe_id: str, image_id: str, port: int) -> dict:
    """A user recipe that runs the stub engine (c3-stub:test) on two test hosts, host networking."""
    args = ["--host", "{node_address}", "--port", "{port}", "--model", "{model}", "--served-model-name",
            "{served_model_name}", "--max-model-len", "{max_model_len}", "--startup-delay", "{startup_delay}",
            "--name", "{profile}-rank{rank}"]
    return {
        "id": recipe_id,
        "title": "stub engine on two netns test hosts (written by the tests)",
        "model": "c3test/stub-model",
        "served_model_name": "stub",
        "engine": "custom",
        "image": image_id,
        "nodes": 2,
        "hardware": {"id": "netns-stub", "description": "2 netns test hosts, CPU only", "gpu": "none",
                     "gpus_per_node": 0, "interconnect": "veth"},
        "defaults": {"port": port, "max_model_len": 4096, "startup_delay": 0.3},
        "command": args,
        "env": {"C3_STUB_TOKENS": "4"},
        "startup_grace_s": 60,
        "docker": {"network_host": True, "ipc_host": False, "gpus": None},
        "provenance": {"measured_by": "c3 test suite", "hardware": "netns test hosts", "notes": "test fixture"},
        "measured": {"tokens_per_s": 1234.0, "concurrency": 1},
        "known_aborts": [{"key": "max_model_len", "op": ">", "value": 65536, "hardware": "netns-stub",
                          "why": "the stub's KV pool holds 65536 tokens (test rule)"}],
        "verified": True,
    }


def write_recipes(home: Path, image_id: str) -> None:
    folder = home / "recipes.d"
    folder.mkdir(parents=True, exist_ok=True)
    crash = {**stub_recipe("stub-crash", image_id, PORT), "env": {"C3_STUB_CRASH_DURING_BOOT": "1"}}
    data = {"recipes": [stub_recipe("stub-pair", image_id, PORT), stub_recipe("stub-alt", image_id, ALT_PORT), crash]}
    (folder / "stub.yaml").write_text(yaml.safe_dump(data))


def ssh(rig, host, command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(rig.ssh_argv(host, command), capture_output=True, text=True, timeout=timeout)


def containers(rig, host) -> dict[str, str]:
    """name → status of the c3-* containers on a host."""
    out = ssh(rig, host, "docker ps -a --filter name=c3- --format '{{.Names}} {{.State}}'").stdout
    return dict(line.split(" ", 1) for line in out.strip().splitlines() if line.strip())


