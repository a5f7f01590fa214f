"""Running the real `c3` CLI in a subprocess, with the test's C3_HOME/C3_STATE, and cleaning up pods."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support import free_port, wait_until  # noqa: F401 - shared with the tests that import them from here

ROOT = Path(__file__).resolve().parents[2]


def c3(*args: str, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run `python -m c3 ARGS` with this process's environment (plus `env`)."""
    full = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "c3", *args], cwd=ROOT, env=full, capture_output=True, text=True, timeout=timeout)


def c3_json(*args: str, env: dict[str, str] | None = None) -> dict:
    result = c3(*args, "--json", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def write_catalog(entries: list[dict]) -> None:
    """A user catalog.d file in the test's $C3_HOME."""
    folder = Path(os.environ["C3_HOME"]) / "catalog.d"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test.yaml").write_text(yaml.safe_dump({"entries": entries}))


def stub_entry(slug: str = "custom/stub", *, env: dict[str, str] | None = None, image: str = "c3-stub:test", command: list[str] | None = None, tp: int = 1, engine: str = "custom") -> dict:
    entry = {
        "slug": slug,
        "engine": engine,
        "image": image,
        "command": command or ["python3", "/opt/c3/stub_engine.py", "--port", "8000"],
        "container_port": 8000,
        "health_path": "/v1/models",
        "tp": tp,
        "env": env or {},
    }
    if engine != "custom":
        entry.update(model="stub/model", command=None, container_port=None)
    return entry


def one_error_line(stderr: str) -> str:
    """The `c3: error:` line; asserts there is exactly one and no traceback."""
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("c3: error:")]
    assert len(errors) == 1, stderr
    return errors[0]
