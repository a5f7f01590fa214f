"""A node whose host is this machine runs without SSH, through the same launch path (real dockerd)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import yaml

from tests.nodes.cluster_helpers import SECRET, C3Runner, http_status, stub_recipe
from tests.support import free_port


def test_local_node_launch_and_stop_without_ssh(docker_client, stub_image, monkeypatch):
    monkeypatch.setenv("C3_API_KEY", SECRET)
    monkeypatch.setenv("HOME", os.environ["C3_HOME"])  # no ~/.ssh: SSH could not work even if tried
    port = free_port()
    image_id = docker_client.images.get(stub_image).id
    recipe = {**stub_recipe("stub-local", image_id, port), "nodes": 1}
    home = Path(os.environ["C3_HOME"])
    (home / "recipes.d").mkdir(parents=True)
    (home / "recipes.d" / "local.yaml").write_text(yaml.safe_dump(recipe))
    c3 = C3Runner()
    name = f"stub-local-{os.getpid()}"  # container c3-NAME on the shared daemon: unique per session
    c3.ok("node", "add", "here", "--host", f"http://127.0.0.1:{port}", "--ssh", "nobody@localhost")
    try:
        c3.ok("recipes", "launch", "stub-local", "--nodes", "here", "--name", name, "--timeout", "60")
        assert http_status(f"http://127.0.0.1:{port}/v1/models", {"Authorization": f"Bearer {SECRET}"}) == 200
        status = json.loads(c3.ok("profile", "status", "--json"))
        assert status["nodes"] == [{"node": "here", "rank": 0, "state": "running", "started_at": status["nodes"][0]["started_at"]}]
        env_file = Path(os.environ["C3_STATE"]) / "run" / f"{name}-here.env"
        assert env_file.stat().st_mode & 0o777 == 0o600
        c3.ok("profile", "stop")
        assert not env_file.exists()
        assert http_status(f"http://127.0.0.1:{port}/health", timeout=1) is None
    finally:
        subprocess.run(["docker", "rm", "-f", f"c3-profile_{name}"], capture_output=True, check=False)
    c3.assert_no_secret()


def test_an_engine_that_answers_health_but_no_completion_fails_phase_first_token_and_is_rolled_back(docker_client, stub_image, monkeypatch):
    """Issue 24's named phases end at the first token: here the engine serves another model name than the recipe's
    (a typo in `served_model_name`), so /health answers and every completion is a 404. The launch fails in phase
    first_token with the engine's own words, and nothing is left running."""
    monkeypatch.setenv("C3_API_KEY", SECRET)
    monkeypatch.setenv("HOME", os.environ["C3_HOME"])
    port = free_port()
    recipe = {**stub_recipe("stub-misnamed", docker_client.images.get(stub_image).id, port), "nodes": 1}
    recipe["command"] = [("elsewhere" if arg == "{served_model_name}" else arg) for arg in recipe["command"]]
    home = Path(os.environ["C3_HOME"])
    (home / "recipes.d").mkdir(parents=True)
    (home / "recipes.d" / "misnamed.yaml").write_text(yaml.safe_dump(recipe))
    c3 = C3Runner()
    name = f"stub-misnamed-{os.getpid()}"
    c3.ok("node", "add", "here", "--host", f"http://127.0.0.1:{port}", "--ssh", "nobody@localhost")
    try:
        done = c3("recipes", "launch", "stub-misnamed", "--nodes", "here", "--name", name, "--timeout", "60")
        assert done.returncode == 1, done.stdout + done.stderr
        assert ("c3: error: phase first_token failed on node here: "
                f"http://127.0.0.1:{port}/v1/completions answered HTTP 404: The model `stub` does not exist.") in done.stderr, done.stderr
        assert "rolled back here" in done.stderr
        assert http_status(f"http://127.0.0.1:{port}/health", timeout=1) is None  # its container is gone
    finally:
        subprocess.run(["docker", "rm", "-f", f"c3-profile_{name}"], capture_output=True, check=False)
    c3.assert_no_secret()
