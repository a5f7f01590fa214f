"""`sleep_mode: true` (issue 28, sleep instead of stop): planned in the estate, launched with vLLM's sleep mode."""

from __future__ import annotations

import json

import yaml

from backend.estate import load_estate, parse_document
from backend.models import CatalogEntry, Gpu, Pod
from backend.runtime.boot import launch_spec
from tests.estate.cli import run_inproc
from tests.estate.quiet_rig import _quiet_host, rig  # noqa: F401 - fixtures


def test_pod_create_sleep_mode_is_written_listed_and_kept_by_edit(rig, tmp_path):
    estate = tmp_path / "estate.yml"
    r = run_inproc("pod", "create", "chat", "--gpus", "1", "--slug", "vllm/qwen3-8b", "--on-demand", "--sleep-mode", "--json", "--file", str(estate))
    assert r.code == 0, r.err
    assert json.loads(r.out)["pod"]["sleep_mode"] is True
    assert yaml.safe_load(estate.read_text())["estate"][0]["sleep_mode"] is True
    listed = run_inproc("pod", "list", "--json", "--file", str(estate))
    assert json.loads(listed.out)["pods"][0]["sleep_mode"] is True
    assert "sleep mode" in run_inproc("pod", "list", "--file", str(estate)).out
    assert run_inproc("pod", "edit", "chat", "--port", "8123", "--file", str(estate)).code == 0
    assert load_estate(estate).pods[0].sleep_mode is True


def test_sleep_mode_is_parsed_strictly_and_warned_on_other_engines(rig, tmp_path):
    estate, problems = parse_document({"schema_version": 1, "estate": [{"name": "a", "slug": "vllm/qwen3-8b", "gpus": [0], "port": 8000,
                                                                        "sleep_mode": "yes"}]}, "f")
    assert estate.pods == [] and "sleep_mode must be true or false" in problems[0].message
    path = tmp_path / "estate.yml"
    r = run_inproc("pod", "create", "g", "--gpus", "0", "--slug", "llamacpp/qwen3-8b-q4km", "--sleep-mode", "--file", str(path))
    assert r.code == 0, r.err
    assert "sleep_mode is for vLLM pods" in r.out + r.err


def test_launch_of_a_sleep_mode_vllm_pod_enables_sleep_mode_and_the_dev_routes():
    entry = CatalogEntry(slug="vllm/qwen3-8b", engine="vllm", image="vllm/vllm-openai:v0.11.0", model="Qwen/Qwen3-8B", env={"A": "1"})
    gpu = Gpu(index=0, uuid="GPU-0", name="RTX 3090", total_mib=24576)
    plain = launch_spec(Pod(name="p", slug=entry.slug, gpus=(0,), port=8000), entry, [gpu], mode="env", estate="e")
    assert "--enable-sleep-mode" not in plain.argv and "VLLM_SERVER_DEV_MODE" not in plain.env
    sleepy = launch_spec(Pod(name="p", slug=entry.slug, gpus=(0,), port=8000, sleep_mode=True), entry, [gpu], mode="env", estate="e")
    assert sleepy.argv[-1] == "--enable-sleep-mode" and sleepy.env == {"VLLM_SERVER_DEV_MODE": "1", "A": "1"}
    llama = CatalogEntry(slug="llamacpp/x", engine="llamacpp", image="i", model="/m.gguf")
    other = launch_spec(Pod(name="p", slug=llama.slug, gpus=(0,), port=8000, sleep_mode=True), llama, [gpu], mode="env", estate="e")
    assert "--enable-sleep-mode" not in other.argv and "VLLM_SERVER_DEV_MODE" not in other.env
