"""`c3 pod edit` of a running pod on the simulated runtime (stub engines as local processes): the plan
says it restarts, a script without --yes is refused with the file untouched and the pod still serving,
and with --yes it is stopped and booted again with the new settings."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import yaml

from tests.runtime.helpers import c3, c3_json, free_port, one_error_line, stub_entry, write_catalog
from tests.runtime.test_sim_lifecycle import create, sim  # noqa: F401 - the fixture and its helper


def serves(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def test_editing_a_running_pod_restarts_it_only_when_confirmed(sim):  # noqa: F811 - pytest's fixture
    write_catalog([stub_entry()])
    old_port = create(sim, "chat", "1")
    up = c3("pod", "up", "chat")
    assert up.returncode == 0, up.stdout + up.stderr
    estate = Path(os.environ["C3_HOME"]) / "estate.yml"
    before = estate.read_bytes()
    new_port = free_port()

    dry = c3("pod", "edit", "chat", "--port", str(new_port), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"port: {old_port} → {new_port}" in dry.stdout and "pod chat is running: it will RESTART" in dry.stdout
    refused = c3("pod", "edit", "chat", "--port", str(new_port))  # no terminal, no --yes
    assert refused.returncode == 1 and "pod `chat` is running: editing it restarts it" in one_error_line(refused.stderr)
    assert "--yes" in refused.stderr
    assert estate.read_bytes() == before and serves(old_port)

    done = c3("pod", "edit", "chat", "--port", str(new_port), "--yes", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(done.stdout)
    assert (data["changed"], data["running"], data["restart"], data["restarted"]) == (["port"], True, True, True)
    assert yaml.safe_load(estate.read_text())["estate"][0]["port"] == new_port
    (row,) = c3_json("pod", "status")["pods"]
    assert row["running"] and row["serving"] and row["port"] == new_port and row["placement"]["verdict"] == "ok"
    assert serves(new_port) and not serves(old_port)
