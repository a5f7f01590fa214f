"""GPU mode detection, device requests per mode, and the docker create arguments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.errors import EnvironmentProblem, UsageError
from backend.runtime.docker_adapter import create_kwargs
from backend.runtime.gpu_mode import ModeDecision, binding, cdi_gpu_names, detect_mode, forced_mode
from backend.runtime.models import LaunchSpec

U0, U1 = "GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-bbbbbbbb-1111-1111-1111-111111111111"


def test_nvidia_runtime_is_detected_from_docker_info():
    d = detect_mode({"Runtimes": {"runc": {}, "nvidia": {"path": "nvidia-container-runtime"}}}, simulated=False, cdi_names=set(), hook_on_path=False)
    assert d.mode == "nvidia"


def test_cdi_is_detected_from_spec_files(tmp_path: Path):
    (tmp_path / "nvidia.yaml").write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n  - name: '0'\n  - name: " + U0 + "\n  - name: all\n")
    (tmp_path / "other.json").write_text(json.dumps({"kind": "vendor.com/fpga", "devices": [{"name": "x"}]}))
    (tmp_path / "broken.yaml").write_text(": : :\n\t-")
    names = cdi_gpu_names([tmp_path, tmp_path / "missing"])
    assert names == {"0", U0, "all"}
    d = detect_mode({"Runtimes": {"runc": {}}, "CDISpecDirs": ["/etc/cdi", "/var/run/cdi"]}, simulated=False, cdi_names=names, hook_on_path=False)
    assert d.mode == "cdi"
    # The daemon reports where it reads specs; those folders are the ones scanned.
    d = detect_mode({"Runtimes": {"runc": {}}, "CDISpecDirs": [str(tmp_path)]}, simulated=False, hook_on_path=False)
    assert d.mode == "cdi" and U0 in d.cdi_names
    # Specs on disk but a daemon without CDI (Docker < 25, or the feature off): say how to enable it.
    with pytest.raises(EnvironmentProblem, match="does not use CDI") as error:
        detect_mode({"Runtimes": {"runc": {}}}, simulated=False, cdi_names=names, hook_on_path=False)
    assert "daemon.json" in error.value.hint


def test_forced_and_simulated_win_and_bad_values_are_usage_errors(monkeypatch):
    info = {"Runtimes": {"nvidia": {}}}
    assert detect_mode(info, simulated=False, forced="cdi", cdi_names=set()).mode == "cdi"
    assert detect_mode(info, simulated=True, cdi_names=set()).mode == "env"
    with pytest.raises(UsageError):
        detect_mode(info, simulated=False, forced="magic", cdi_names=set())
    monkeypatch.setenv("C3_GPU_MODE", "env")
    assert forced_mode(None) == "env" and forced_mode("nvidia") == "nvidia"


def test_no_way_to_pin_gpus_is_an_environment_problem():
    with pytest.raises(EnvironmentProblem, match="cannot pin GPUs"):
        detect_mode({"Runtimes": {"runc": {}}}, simulated=False, cdi_names=set(), hook_on_path=False)
    assert detect_mode({"Runtimes": {}}, simulated=False, cdi_names=set(), hook_on_path=True).mode == "nvidia"


def test_bindings_pin_by_device_and_set_no_cuda_mask():
    nv = binding("nvidia", [U0, U1], [0, 1])
    assert nv.device_requests == [{"Driver": "nvidia", "DeviceIDs": [U0, U1], "Capabilities": [["gpu"]]}]
    assert "CUDA_VISIBLE_DEVICES" not in nv.env and "NVIDIA_VISIBLE_DEVICES" not in nv.env
    cdi = binding("cdi", [U0, U1], [0, 1], frozenset({U0, U1, "0", "1"}))
    assert cdi.device_requests == [{"Driver": "cdi", "DeviceIDs": [f"nvidia.com/gpu={U0}", f"nvidia.com/gpu={U1}"]}]
    assert cdi.env == {}
    # A spec generated with index names only: fall back to the index name.
    assert binding("cdi", [U1], [1], frozenset({"0", "1"})).device_requests[0]["DeviceIDs"] == ["nvidia.com/gpu=1"]
    env = binding("env", [U0, U1])
    assert env.device_requests == [] and env.env == {"NVIDIA_VISIBLE_DEVICES": f"{U0},{U1}"}


def spec(mode: str = "nvidia") -> LaunchSpec:
    return LaunchSpec(
        pod="chat", slug="vllm/qwen3-8b", engine="vllm", image="img:1", argv=("vllm", "serve", "m"), env={"A": "1"},
        gpu_indices=(0, 1), gpu_uuids=(U0, U1), host_port=8080, container_port=8000, estate="/e/estate.yml", gpu_mode=mode,
    )


def test_create_kwargs_names_labels_ports_cache_restart_and_secret(tmp_path: Path):
    kw = create_kwargs(spec(), ModeDecision("nvidia", "test"), {"HF_TOKEN": "hf_s3cret"}, tmp_path)
    assert kw["name"] == "c3-chat"
    assert kw["labels"] == {"io.c3.pod": "chat", "io.c3.slug": "vllm/qwen3-8b", "io.c3.estate": "/e/estate.yml", "io.c3.gpus": f"{U0},{U1}"}
    assert kw["ports"] == {"8000/tcp": 8080}
    assert kw["volumes"] == {str(tmp_path): {"bind": "/root/.cache/huggingface", "mode": "rw"}}
    assert kw["restart_policy"] == {"Name": "no"}
    assert kw["environment"]["HF_TOKEN"] == "hf_s3cret" and kw["environment"]["A"] == "1"
    assert not any("hf_s3cret" in a for a in kw["entrypoint"])
    (request,) = kw["device_requests"]
    assert request["Driver"] == "nvidia" and request["DeviceIDs"] == [U0, U1]
    env_kw = create_kwargs(spec("env"), ModeDecision("env", "test"), {}, tmp_path)
    assert "device_requests" not in env_kw and env_kw["environment"]["NVIDIA_VISIBLE_DEVICES"] == f"{U0},{U1}"
