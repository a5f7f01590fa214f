"""`c3 pod edit NAME --gpus/--port/--slug` through the real CLI entry point: the same rules as
`pod create` (its code path), the pod kept in its place with the file's comments, and on every
refusal the estate file unchanged byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import backend.estate.validate as validate_module
from tests.estate.cli import RIG_4, run_inproc
from tests.estate.fakes import fake_fit

ESTATE = """\
schema_version: 1
# my rig's pods
estate:
  - name: chat     # the everyday model
    slug: vllm/qwen3-8b
    gpus: [0]
    port: 8020
  - name: coder
    slug: vllm/qwen3-32b-awq-tp2
    gpus: [2, 3]
    port: 8010
"""


@pytest.fixture(autouse=True)
def _quiet_host(monkeypatch):
    monkeypatch.setattr("backend.estate.ports.host_port_bound", lambda port: False)


@pytest.fixture
def estate(tmp_path: Path, monkeypatch) -> Path:
    from tests.support import use_rig

    use_rig(tmp_path, monkeypatch, RIG_4)
    monkeypatch.setattr(validate_module, "default_fit", lambda: fake_fit)
    path = tmp_path / "estate.yml"
    path.write_text(ESTATE)
    return path


def pods(path: Path) -> list[dict]:
    return yaml.safe_load(path.read_text())["estate"]


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert lines and lines[0].startswith("c3: error: ") and "Traceback" not in err, err
    assert len(lines) <= 2 and all(line.startswith("hint: ") for line in lines[1:]), err
    return lines[0]


def test_edit_port_gpus_and_slug_in_place_keeping_the_files_comments(estate):
    r = run_inproc("pod", "edit", "chat", "--gpus", "1", "--port", "8040", "--file", str(estate))
    assert r.code == 0, r.err
    assert r.out.startswith("✓ edited pod `chat`: vllm/qwen3-8b on GPU [1] port 8040 — fit: fits"), r.out
    assert f"boot it: c3 pod up chat --file {estate}" in r.out
    assert [(p["name"], p["gpus"], p["port"]) for p in pods(estate)] == [("chat", [1], 8040), ("coder", [2, 3], 8010)]
    text = estate.read_text()
    assert "# my rig's pods" in text and "# the everyday model" in text
    r = run_inproc("pod", "edit", "coder", "--slug", "vllm/qwen3-30b-a3b-tp2", "--gpus", "2,3", "--json", "--file", str(estate))
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["before"]["slug"] == "vllm/qwen3-32b-awq-tp2" and data["pod"]["slug"] == "vllm/qwen3-30b-a3b-tp2"
    assert (data["changed"], data["running"], data["restart"], data["restarted"], data["dry_run"]) == (["slug"], False, False, None, False)
    assert data["fit"]["verdict"] == "fits"
    assert pods(estate)[1]["slug"] == "vllm/qwen3-30b-a3b-tp2" and pods(estate)[1]["port"] == 8010  # the port it had


def test_dry_run_checks_and_shows_the_plan_and_writes_nothing(estate):
    before = estate.read_bytes()
    r = run_inproc("pod", "edit", "chat", "--port", "8044", "--dry-run", "--file", str(estate))
    assert r.code == 0, r.err
    assert "dry run: nothing written, nothing restarted" in r.out and "port: 8020 → 8044" in r.out and "slug: vllm/qwen3-8b (unchanged)" in r.out
    r = run_inproc("pod", "edit", "chat", "--port", "8044", "--dry-run", "--json", "--file", str(estate))
    assert r.code == 0 and json.loads(r.out)["pod"]["port"] == 8044 and json.loads(r.out)["dry_run"] is True
    r = run_inproc("pod", "edit", "chat", "--port", "8010", "--dry-run", "--file", str(estate))  # refused in a dry run too
    assert r.code == 1 and "E4: port 8010 claimed by chat, coder" in one_error_line(r.err)
    assert estate.read_bytes() == before


@pytest.mark.parametrize(
    ("args", "code", "expected"),
    [
        (["chat", "--gpus", "2"], 1, "E1: GPU 2 (RTX 5090) claimed by chat, coder"),
        (["chat", "--port", "8010"], 1, "E4: port 8010 claimed by chat, coder"),
        (["chat", "--gpus", "0,1"], 1, "TP=1"),
        (["chat", "--slug", "vllm/qwen3-32b-awq-tp2"], 1, "TP=2"),
        (["chat", "--slug", "vllm/nope"], 1, "unknown slug `vllm/nope`"),
        (["chat", "--gpus", "9"], 1, "GPU index 9 not present"),
        (["nosuch", "--port", "8044"], 1, "pod `nosuch` not found"),
        (["chat"], 2, "nothing to edit in pod `chat`"),
        (["chat", "--gpus", "a"], 2, "is not a GPU index"),
        (["chat", "--gpus", "1,1"], 2, "listed twice"),
        (["chat", "--port", "0"], 2, "--port"),
    ],
)
def test_edit_refusals_are_one_line_and_leave_the_file_byte_for_byte(estate, args, code, expected):
    before = estate.read_bytes()
    r = run_inproc("pod", "edit", *args, "--file", str(estate))
    assert r.code == code, (r.out, r.err)
    assert expected in one_error_line(r.err)
    assert estate.read_bytes() == before


def test_wont_fit_is_refused_unless_forced(estate, monkeypatch):
    from backend.models.fit import FitReport

    def fit(entry, gpus):
        if entry.slug == "vllm/gpt-oss-120b":
            return FitReport(verdict="wont-fit", available_kv_gib=-3.2, reasons=["weights 60.1 GiB > budget 21.2 GiB"])
        return fake_fit(entry, gpus)

    monkeypatch.setattr(validate_module, "default_fit", lambda: fit)
    before = estate.read_bytes()
    r = run_inproc("pod", "edit", "chat", "--slug", "vllm/gpt-oss-120b", "--file", str(estate))
    assert r.code == 1 and "does not fit" in one_error_line(r.err) and estate.read_bytes() == before
    r = run_inproc("pod", "edit", "chat", "--slug", "vllm/gpt-oss-120b", "--force", "--file", str(estate))
    assert r.code == 0, r.err
    assert pods(estate)[0]["slug"] == "vllm/gpt-oss-120b"
