"""`on_demand: true` pods may share GPUs (the gateway swaps them); any other overlap stays refused (issue 28)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from backend.estate import load_estate, parse_document, save_estate
from tests.estate.cli import run_inproc
from tests.estate.quiet_rig import _quiet_host, rig  # noqa: F401 - fixtures


def create(estate: Path, name: str, gpus: str, *extra: str):
    return run_inproc("pod", "create", name, "--gpus", gpus, "--slug", "vllm/qwen3-8b", *extra, "--file", str(estate))


def test_on_demand_pods_share_gpus_and_others_are_told_why_not(rig, tmp_path):
    estate = tmp_path / "estate.yml"
    assert create(estate, "chat", "1", "--on-demand").code == 0
    r = create(estate, "coder", "1", "--on-demand", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["pod"]["on_demand"] is True
    pods = load_estate(estate).pods
    assert [(p.name, p.gpus, p.on_demand) for p in pods] == [("chat", (1,), True), ("coder", (1,), True)]
    assert yaml.safe_load(estate.read_text())["estate"][1]["on_demand"] is True
    before = estate.read_bytes()
    r = create(estate, "fixed", "1")  # not on demand: refused, and the error says on demand would share
    assert r.code == 1 and "E1: GPU 1 (RTX 3090) claimed by chat, coder, fixed" in r.err
    assert "only when every one of them is on demand" in r.err and "fixed is not" in r.err and "--on-demand" in r.err
    assert estate.read_bytes() == before
    # `pod validate` reads the shared GPU as a note, not an error.
    v = run_inproc("pod", "validate", "--file", str(estate))
    assert v.code == 0, (v.out, v.err)


def test_on_demand_is_parsed_strictly_and_round_trips(tmp_path):
    estate, problems = parse_document({"schema_version": 1, "estate": [{"name": "a", "slug": "vllm/qwen3-8b", "gpus": [0], "port": 8000, "on_demand": "yes"}]}, "f")
    assert estate.pods == [] and "on_demand must be true or false" in problems[0].message
    path = tmp_path / "estate.yml"
    path.write_text("schema_version: 1\n# mine\nestate:\n  - name: a\n    slug: vllm/qwen3-8b\n    gpus: [0]\n    port: 8000\n    on_demand: true\n")
    loaded = load_estate(path)
    assert loaded.pods[0].on_demand
    save_estate(path, loaded)
    assert "# mine" in path.read_text() and load_estate(path).pods[0].on_demand
    loaded.pods[0] = loaded.pods[0].model_copy(update={"on_demand": False})
    save_estate(path, loaded)
    assert "on_demand" not in path.read_text()


def test_pod_list_shows_which_pods_are_on_demand(rig, tmp_path):
    estate = tmp_path / "estate.yml"
    assert create(estate, "chat", "1", "--on-demand").code == 0
    assert create(estate, "coder", "1", "--on-demand").code == 0
    assert create(estate, "fixed", "2").code == 0
    data = json.loads(run_inproc("pod", "list", "--json", "--file", str(estate)).out)
    assert [(p["name"], p["on_demand"]) for p in data["pods"]] == [("chat", True), ("coder", True), ("fixed", False)]
    lines = run_inproc("pod", "list", "--file", str(estate)).out.splitlines()
    rows = {line.split()[0]: line for line in lines[1:4]}
    assert rows["chat"].endswith("  on demand") and rows["coder"].endswith("  on demand") and "on demand" not in rows["fixed"]
    assert rows["chat"].index("on demand") == rows["coder"].index("on demand")  # a column, aligned
