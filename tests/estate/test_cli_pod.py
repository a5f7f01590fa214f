"""`c3 pod create|list|rm|validate` and `c3 gpus` through the real CLI entry point."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

import backend.estate.validate as validate_module
from tests.estate.cli import RIG_4, run_inproc, run_proc
from tests.estate.fakes import fake_fit


@pytest.fixture(autouse=True)
def _quiet_host(monkeypatch):
    """Ports other processes on this (shared) machine listen on must not move the default port
    these tests expect; the host check itself is tested in test_io.py."""
    monkeypatch.setattr("backend.estate.ports.host_port_bound", lambda port: False)


@pytest.fixture
def rig(tmp_path: Path, monkeypatch) -> Path:
    from tests.support import use_rig

    return use_rig(tmp_path, monkeypatch, RIG_4)


@pytest.fixture
def estate(tmp_path: Path) -> Path:
    return tmp_path / "estate.yml"


@pytest.fixture
def priced(monkeypatch):
    """A deterministic fit at the seam, so these tests pin the CLI, not the fit-check's numbers."""
    monkeypatch.setattr(validate_module, "default_fit", lambda: fake_fit)


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert lines and lines[0].startswith("c3: error: "), err
    assert len(lines) <= 2 and all(line.startswith("hint: ") for line in lines[1:]), err
    assert "Traceback" not in err
    return lines[0]


def test_create_reports_slug_gpus_port_fit_and_how_to_boot(rig, estate, priced):
    r = run_inproc("pod", "create", "chat", "--gpus", "1", "--slug", "vllm/qwen3-8b", "--file", str(estate))
    assert r.code == 0, r.err
    first = r.out.splitlines()[0]
    assert "created pod `chat`: vllm/qwen3-8b on GPU [1] port 8020" in first
    assert "fit: fits — weights 15.3 GiB + KV" in first and "GiB budget per GPU" in first
    assert f"boot it: c3 pod up chat --file {estate}" in r.out
    doc = yaml.safe_load(estate.read_text())
    assert doc["estate"][0]["gpus"] == [1] and doc["estate"][0]["port"] == 8020


def test_create_default_file_is_in_c3_home(rig, priced):
    r = run_inproc("pod", "create", "chat", "--gpus", "0", "--slug", "vllm/qwen3-8b")
    assert r.code == 0, r.err
    assert (Path(os.environ["C3_HOME"]) / "estate.yml").exists()
    assert "boot it: c3 pod up chat\n" in r.out


@pytest.mark.parametrize(
    ("args", "code", "expected"),
    [
        (["bad", "--gpus", "1", "--slug", "vllm/qwen3-32b-awq-tp2"], 1, "TP=2"),
        (["x", "--gpus", "1", "--slug", "vllm/nope"], 1, "unknown slug `vllm/nope`"),
        (["x", "--gpus", "9", "--slug", "vllm/qwen3-8b"], 1, "GPU index 9 not present (detected: [0, 1, 2, 3]"),
        (["x", "--gpus", ",", "--slug", "vllm/qwen3-8b"], 2, "--gpus must list at least one index"),
        (["x", "--gpus", "a,b", "--slug", "vllm/qwen3-8b"], 2, "is not a GPU index"),
        (["x", "--gpus", "1,1", "--slug", "vllm/qwen3-8b"], 2, "listed twice"),
        (["X_y", "--gpus", "1", "--slug", "vllm/qwen3-8b"], 2, "is not valid"),
        (["x", "--gpus", "1", "--slug", "vllm/qwen3-8b", "--port", "0"], 2, "--port"),
        (["x", "--gpus", "1"], 2, "--slug"),
    ],
)
def test_create_refusals_are_one_line_with_the_right_exit_code(rig, estate, priced, args, code, expected):
    estate.write_text("schema_version: 1\nestate:\n  - {name: chat, slug: vllm/qwen3-8b, gpus: [0], port: 8020}\n")
    before = estate.read_bytes()
    r = run_inproc("pod", "create", *args, "--file", str(estate))
    assert r.code == code, (r.out, r.err)
    assert expected in one_error_line(r.err)
    assert estate.read_bytes() == before


def test_collisions_name_pods_gpus_and_ports(rig, estate, priced):
    assert run_inproc("pod", "create", "chat", "--gpus", "1", "--slug", "vllm/qwen3-8b", "--file", str(estate)).code == 0
    before = estate.read_bytes()
    r = run_inproc("pod", "create", "chat2", "--gpus", "1", "--slug", "vllm/qwen3-8b", "--file", str(estate))
    assert r.code == 1 and "E1: GPU 1 (RTX 3090) claimed by chat, chat2" in one_error_line(r.err)
    r = run_inproc("pod", "create", "p", "--gpus", "0", "--slug", "vllm/qwen3-8b", "--port", "8020", "--file", str(estate))
    assert r.code == 1 and "E4: port 8020 claimed by chat, p" in one_error_line(r.err)
    r = run_inproc("pod", "create", "Chat", "--gpus", "0", "--slug", "vllm/qwen3-8b", "--file", str(estate))
    assert r.code == 1 and "pod `chat` already exists in" in one_error_line(r.err)
    assert estate.read_bytes() == before


def test_wont_fit_and_unpriced_are_distinct(rig, estate, monkeypatch):
    def fit(entry, gpus):
        from backend.models.fit import FitReport

        if entry.engine == "llamacpp":
            return FitReport(verdict="unknown", reasons=["no llama.cpp pricing here"])
        return FitReport(verdict="wont-fit", available_kv_gib=-3.2, reasons=["weights 60.1 GiB > budget 21.2 GiB"])

    monkeypatch.setattr(validate_module, "default_fit", lambda: fit)
    r = run_inproc("pod", "create", "big", "--gpus", "0", "--slug", "vllm/qwen3-8b", "--file", str(estate))
    line = one_error_line(r.err)
    assert r.code == 1 and "does not fit the selected GPU(s) GPU 0: wont-fit (KV left -3.2 GiB) — weights 60.1 GiB > budget 21.2 GiB" in line
    assert not estate.exists()
    r = run_inproc("pod", "create", "g", "--gpus", "0", "--slug", "llamacpp/qwen3-8b-q4km", "--file", str(estate))
    assert r.code == 0 and "fit unknown — not priced: no llama.cpp pricing here" in r.out


def test_heterogeneous_tp_warns_in_output(rig, estate, priced):
    r = run_inproc("pod", "create", "het", "--gpus", "2,3", "--slug", "vllm/qwen3-32b-awq-tp2", "--file", str(estate))
    assert r.code == 0, r.err
    assert "⚠" in r.out and "mixed architectures" in r.out and "GPU 2 (RTX 5090, sm 12.0)" in r.out


def test_list_json_and_human(rig, estate, priced):
    r = run_inproc("pod", "list", "--json", "--file", str(estate))
    assert r.code == 0
    assert json.loads(r.out) == {"file": str(estate), "exists": False, "pods": [], "claimed_gpus": [], "free_gpus": [0, 1, 2, 3]}
    assert "no estate file at" in run_inproc("pod", "list", "--file", str(estate)).out
    run_inproc("pod", "create", "chat", "--gpus", "1", "--slug", "vllm/qwen3-8b", "--file", str(estate))
    data = json.loads(run_inproc("pod", "list", "--json", "--file", str(estate)).out)
    assert data["pods"] == [{"name": "chat", "slug": "vllm/qwen3-8b", "gpus": [1], "port": 8020, "on_demand": False, "sleep_mode": False}]
    assert data["claimed_gpus"] == [1] and data["free_gpus"] == [0, 2, 3]
    human = run_inproc("pod", "list", "--file", str(estate)).out
    assert "1 pod(s) in" in human and "chat  vllm/qwen3-8b  GPU [1]  port 8020" in human and "free GPU(s): [0, 2, 3]" in human


def test_list_without_any_gpu_probe_keeps_the_shape(estate, monkeypatch):
    monkeypatch.delenv("C3_RIG", raising=False)
    monkeypatch.setattr("backend.gpu.nvml._import_pynvml", lambda: _no_nvml())
    r = run_inproc("pod", "list", "--json", "--file", str(estate))
    assert r.code == 0
    assert set(json.loads(r.out)) == {"file", "exists", "pods", "claimed_gpus", "free_gpus"}


def _no_nvml():
    from tests.gpu.fake_pynvml import NVML_ERROR_LIBRARY_NOT_FOUND, FakeNvml

    return FakeNvml([], init_error=NVML_ERROR_LIBRARY_NOT_FOUND)


def test_rm(rig, estate, priced, monkeypatch):
    run_inproc("pod", "create", "chat", "--gpus", "1", "--slug", "vllm/qwen3-8b", "--file", str(estate))
    before = estate.read_bytes()
    r = run_inproc("pod", "rm", "nope", "--file", str(estate))
    assert r.code == 1 and "pod `nope` not found in" in one_error_line(r.err)
    monkeypatch.setattr("c3.cli.pod._runtime_hook", lambda: lambda pod: True)
    r = run_inproc("pod", "rm", "chat", "--file", str(estate))
    assert r.code == 1 and "`c3 pod down chat` first" in one_error_line(r.err)
    assert estate.read_bytes() == before

    def unreachable(pod):
        raise ConnectionError("Docker daemon not reachable at unix:///var/run/docker.sock")

    monkeypatch.setattr("c3.cli.pod._runtime_hook", lambda: unreachable)
    r = run_inproc("pod", "rm", "chat", "--file", str(estate))
    assert r.code == 0 and "removed pod `chat`" in r.out
    assert "Docker daemon not reachable" in r.err and "docker rm -f c3-chat" in r.err
    assert yaml.safe_load(estate.read_text())["estate"] == []


def test_rm_asks_the_real_runtime(rig, estate, priced):
    """With the simulated runtime installed and nothing running, rm just works."""
    run_inproc("pod", "create", "chat", "--gpus", "1", "--slug", "vllm/qwen3-8b", "--file", str(estate))
    r = run_inproc("pod", "rm", "chat", "--file", str(estate))
    assert r.code == 0, r.err


def test_validate_hand_written_files(rig, estate, priced):
    estate.write_text(
        "schema_version: 1\nrig: {hardware_id: rtx-3090, gpu_count: 4}\nestate:\n"
        "  - {name: qwen-left, compose: vllm/qwen3-8b, gpus: [0], port: 8110}\n"
        "  - {name: qwen-right, compose: vllm/qwen3-8b, gpus: [0], port: 8110}\n"
        "  - {name: wide, compose: vllm/qwen3-32b-awq-tp2, gpus: [1], port: 8111}\n"
        "  - {name: gone, compose: vllm/not-real, gpus: [7], port: 8112}\n"
        "  - {name: Bad, gpus: [1], port: x}\n"
    )
    before = estate.read_bytes()
    r = run_inproc("pod", "validate", "--file", str(estate))
    assert r.code == 2  # issue 16: a malformed entry (`Bad`, `port: x`) is exit 2 wherever it sits
    assert "is not a valid estate: " in one_error_line(r.err) and "more)" in r.err
    for expected in ("E1: GPU 0 (RTX 3090) claimed by qwen-left, qwen-right", "E4: port 8110 claimed by qwen-left, qwen-right",
                     "tp=2 * pp=1 = 2 != 1 cards selected", "unknown slug `vllm/not-real`", "pod name `Bad` is not valid"):
        assert expected in r.out
    data = json.loads(run_inproc("pod", "validate", "--json", "--file", str(estate)).out)
    assert data["valid"] is False and {p["code"] for p in data["problems"]} >= {"E1", "E4", "C1", "slug", "name"}
    assert estate.read_bytes() == before
    # Well-formed but breaking rules only (collisions, TP count, unknown slug): refused, exit 1.
    estate.write_text(before.decode().replace("  - {name: Bad, gpus: [1], port: x}\n", ""))
    r = run_inproc("pod", "validate", "--file", str(estate))
    assert r.code == 1 and "E1: GPU 0 (RTX 3090) claimed by qwen-left, qwen-right" in r.out
    estate.write_text("schema_version: 1\nestate:\n  - {name: ok, slug: vllm/qwen3-8b, gpus: [0], port: 8110}\n")
    r = run_inproc("pod", "validate", "--file", str(estate))
    assert r.code == 0 and r.out.startswith("✓ valid")


def test_malformed_estate_is_exit_2_and_untouched(rig, estate, priced):
    estate.write_bytes(b"schema_version: 2\nestate: []\n")
    r = run_inproc("pod", "create", "a", "--gpus", "0", "--slug", "vllm/qwen3-8b", "--file", str(estate))
    assert r.code == 2 and "unsupported estate schema_version=2" in one_error_line(r.err)
    assert estate.read_bytes() == b"schema_version: 2\nestate: []\n"


def test_gpus_on_the_simulated_rig(rig):
    r = run_inproc("gpus", "--json")
    assert r.code == 0
    data = json.loads(r.out)
    assert [g["index"] for g in data["gpus"]] == [0, 1, 2, 3]
    for g in data["gpus"]:
        assert {"index", "uuid", "name", "total_mib", "used_mib", "sm"} <= set(g)
        assert g["uuid"].startswith("GPU-")
    assert data["gpus"][2]["name"] == "NVIDIA GeForce RTX 5090" and data["gpus"][2]["sm"] == "12.0"
    assert data["gpus"][0]["cuda_total_mib"] == 24576 - 422
    human = run_inproc("gpus").out
    assert "RTX 5090" in human and "23.59 GiB" in human and f"source: simulated:{rig}" in human


def test_gpus_demo_rig(monkeypatch):
    monkeypatch.setenv("C3_RIG", "demo")
    data = json.loads(run_inproc("gpus", "--json").out)
    assert len(data["gpus"]) == 4 and data["source"] == "simulated:demo"


def test_gpus_with_neither_probe_is_exit_3_one_line(tmp_path, require_service):
    env = {k: v for k, v in os.environ.items() if k not in ("C3_RIG", "LD_LIBRARY_PATH")}
    env["LD_LIBRARY_PATH"] = str(tmp_path)  # no libnvidia-ml.so.1 here
    import subprocess

    from tests.estate.cli import C3_BIN

    done = subprocess.run([str(C3_BIN), "gpus"], capture_output=True, text=True, env=env, timeout=120)
    # A machine with a real driver in the default library path cannot show this; CI (no GPU) must.
    require_service("no NVML in the default library path", done.returncode != 0, "a real NVML answered")
    assert done.returncode == 3 and done.stdout == ""
    assert "no GPUs to read" in one_error_line(done.stderr) and "C3_RIG" in done.stderr


def test_bad_rig_file_is_exit_2(tmp_path):
    bad = tmp_path / "rig.yaml"
    bad.write_text("gpus: [\n")
    r = run_proc("gpus", env={"C3_RIG": str(bad)})
    assert r.code == 2 and str(bad) in one_error_line(r.err)


def test_with_the_real_catalog_and_fit_check(rig, estate):
    """No seam: FIT's catalog and fit-check decide (only verdicts no pricing model could flip)."""
    r = run_inproc("pod", "create", "chat", "--gpus", "0", "--slug", "vllm/qwen3-8b-awq", "--file", str(estate))
    assert r.code == 0, r.err
    # an AWQ slug is never `fits` (its Marlin load is not priced: backend/fit/vllm.py MARLIN_NOTE); it boots
    assert "fit: tight — weights" in r.out and "GiB visible" in r.out
    before = estate.read_bytes()
    r = run_inproc("pod", "create", "huge", "--gpus", "1", "--slug", "vllm/gpt-oss-120b", "--file", str(estate))
    assert r.code == 1 and "vllm/gpt-oss-120b` does not fit the selected GPU(s) GPU 1: wont-fit" in one_error_line(r.err)
    # requires_homogeneous_arch on a 3090 + 5090 pair (club-3090 #762/#783)
    r = run_inproc("pod", "create", "mixed", "--gpus", "1,2", "--slug", "vllm/qwen3-30b-a3b-fp8-tp2", "--file", str(estate))
    assert r.code == 1 and "needs one GPU architecture across its TP=2 group" in one_error_line(r.err)
    # experimental status needs --force
    r = run_inproc("pod", "create", "next", "--gpus", "0,1,2,3", "--slug", "vllm/qwen3-next-80b-fp8-tp4", "--file", str(estate))
    assert r.code == 1 and "is experimental" in one_error_line(r.err)
    assert estate.read_bytes() == before


def test_unusable_file_paths_are_one_line_errors(rig, tmp_path, priced):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for path in (blocker / "estate.yml", tmp_path / ("n" * 300) / "estate.yml"):
        r = run_inproc("pod", "create", "chat", "--gpus", "0", "--slug", "vllm/qwen3-8b", "--file", str(path))
        assert r.code == 3 and "cannot write estate file" in one_error_line(r.err)
        r = run_inproc("pod", "list", "--json", "--file", str(path))
        assert r.code == 3 and "cannot read estate file" in one_error_line(r.err)
        r = run_inproc("pod", "rm", "chat", "--file", str(path))
        assert r.code == 1 and "no estate file" in one_error_line(r.err)
    assert blocker.read_text() == "x"


def test_create_json(rig, estate, priced):
    r = run_inproc("pod", "create", "het", "--gpus", "2,3", "--slug", "vllm/qwen3-32b-awq-tp2", "--json", "--file", str(estate))
    assert r.code == 0, r.err
    data = json.loads(r.out)
    from backend.catalog import load_catalog

    default = load_catalog().get("vllm/qwen3-32b-awq-tp2").default_port
    assert data["pod"]["name"] == "het" and data["pod"]["gpus"] == [2, 3] and data["pod"]["port"] == default
    assert len(data["pod"]["uuids"]) == 2 and data["port_chosen"] is True
    assert data["fit"]["verdict"] == "fits" and data["fit"]["kv_bytes_per_token"] == 147456
    assert {w["code"] for w in data["warnings"]} >= {"arch"}
