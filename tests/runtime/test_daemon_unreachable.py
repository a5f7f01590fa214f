"""An unreachable Docker daemon: one clear line, exit 3, for every runtime command."""

from __future__ import annotations

import os

import pytest

from tests.runtime.helpers import c3, one_error_line, stub_entry, write_catalog


@pytest.mark.parametrize("argv", [("pod", "up", "chat"), ("pod", "status"), ("pod", "down", "chat"), ("pod", "logs", "chat"), ("up",), ("down",)])
def test_unreachable_daemon_is_one_line_exit_3(argv, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent")
    monkeypatch.setenv("C3_RUNTIME", "docker")
    write_catalog([stub_entry()])
    with open(os.path.join(os.environ["C3_HOME"], "estate.yml"), "w") as fh:
        fh.write("schema_version: 1\nestate:\n  - name: chat\n    slug: custom/stub\n    gpus: [0]\n    port: 18555\n")
    result = c3(*argv)
    assert result.returncode == 3, result.stdout + result.stderr
    line = one_error_line(result.stderr)
    assert line == "c3: error: the Docker daemon is unreachable at unix:///nonexistent: no socket there"
    assert "hint: start dockerd" in result.stderr
