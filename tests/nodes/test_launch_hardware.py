"""Issue 24: launches respect the hardware. `c3 recipes launch` runs as a user would on a local node
whose `docker` and `nvidia-smi` are stand-ins (tests/nodes/standin.py): nvidia-smi lists the GPUs a
test gives it (the Nodes screen's probe), docker records its argv and says which GPUs running c3 pods
hold. A refused launch leaves no `docker run`, no env file and no profile."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.nodes.cluster_helpers import C3Runner
from tests.nodes.standin import StandIn, hold, nvidia_smi, standin_docker

GB10 = "gb10-vllm-qwen3-8b-nvfp4"
LLAMA_1GPU = "3090-ikllama-qwen3.6-27b-iq4ks-mtp"
RTX3090 = ("NVIDIA GeForce RTX 3090", 24576, "8.6")
RTX5090 = ("NVIDIA GeForce RTX 5090", 32607, "12.0")


@pytest.fixture
def box(tmp_path) -> StandIn:
    """Node `here` (this machine) with a stand-in docker; no GPUs until a test lists some."""
    from backend.nodes.registry import add_node

    add_node("here", "http://127.0.0.1:18125", "me@127.0.0.1", local=True)
    return standin_docker(tmp_path)


def _launch(box: StandIn, *args: str):
    return C3Runner()("recipes", "launch", *args, "--nodes", "here", env=box.env, timeout=60)


def _runs(box: StandIn) -> list[list[str]]:
    return [c for c in box.calls() if c[:1] == ["run"]]


def _gpus_of(run: list[str]) -> str | None:
    return run[run.index("--gpus") + 1] if "--gpus" in run else None


def _refused(box: StandIn, result, *words: str) -> str:
    err = result.stderr
    assert result.returncode == 1, (result.returncode, result.stdout, err)
    assert "Traceback" not in err + result.stdout
    assert err.startswith("c3: error: ") and err.count("c3: error:") == 1, err
    for word in words:
        assert word in err, err
    assert not _runs(box), box.calls()
    assert not list(Path(os.environ["C3_STATE"]).rglob("*.env"))
    assert not (Path(os.environ["C3_HOME"]) / "profiles" / f"{GB10}.yaml").exists()
    return err


def test_a_gb10_nvfp4_recipe_on_a_3090_box_is_refused(box):
    nvidia_smi(box, [RTX3090, RTX3090])
    err = _refused(box, _launch(box, GB10, "--no-wait"), "compute capability 8.6 < 10.0", "nvfp4", "--force")
    assert "hint:" in err
    dry = _launch(box, GB10, "--dry-run")  # a dry run always shows the plan (as shard's), with the refusal in it
    assert dry.returncode == 0 and "warning: a real launch refuses: node here has 0 of the 1 GPU(s)" in dry.stdout, dry
    assert "8.6 < 10.0" in dry.stdout and "--force" in dry.stdout and not _runs(box)


def test_with_force_it_launches_with_a_warning(box):
    uuids = nvidia_smi(box, [RTX3090, RTX3090])
    dry = _launch(box, GB10, "--dry-run", "--force")
    assert dry.returncode == 0, dry.stderr
    assert "warning: --force: node here has 0 of the 1 GPU(s)" in dry.stdout and "8.6 < 10.0" in dry.stdout
    result = _launch(box, GB10, "--force", "--no-wait")
    assert result.returncode == 0, (result.stdout, result.stderr)
    (run,) = _runs(box)
    assert _gpus_of(run) == f'"device={uuids[0]}"'


def test_a_one_gpu_recipe_gets_one_device_id_not_all(box):
    uuids = nvidia_smi(box, [RTX3090, RTX3090])
    dry = _launch(box, LLAMA_1GPU, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"--gpus '\"device={uuids[0]}\"'" in dry.stdout and "--gpus all" not in dry.stdout
    result = _launch(box, LLAMA_1GPU, "--no-wait")
    assert result.returncode == 0, (result.stdout, result.stderr)
    (run,) = _runs(box)
    assert _gpus_of(run) == f'"device={uuids[0]}"'


def test_a_gpu_held_by_a_running_pod_is_not_given_out(box):
    uuids = nvidia_smi(box, [RTX3090, RTX3090])
    hold(box, "chat", [uuids[0]])
    result = _launch(box, LLAMA_1GPU, "--no-wait")
    assert result.returncode == 0, (result.stdout, result.stderr)
    (run,) = _runs(box)
    assert _gpus_of(run) == f'"device={uuids[1]}"'


def test_no_free_gpu_left_is_refused_naming_the_pod_even_with_force(box):
    nvidia_smi(box, [RTX3090])
    hold(box, "chat", ["0"])  # `--gpus device=0` stores the index
    for extra in ((), ("--force",)):
        _refused(box, _launch(box, LLAMA_1GPU, "--no-wait", *extra), "GPU 0 by pod chat", "c3 pod down")


def test_a_gb10_recipe_on_a_blackwell_card_passes_and_unified_memory_is_not_judged(box):
    from backend.cluster.hardware import NodeGpus, pick
    from backend.nodes.health import NodeGpu
    from backend.recipes import get_recipe

    recipe = get_recipe(GB10)
    spark = NodeGpus("s", [NodeGpu(0, "NVIDIA GB10", None, None, "GPU-a", "12.1")])
    assert pick(recipe, spark, force=False).devices == ["GPU-a"]
    five = NodeGpus("f", [NodeGpu(0, *RTX5090[:1], RTX5090[1], 0, None, None)])  # old driver: no uuid, no compute_cap
    assert pick(recipe, five, force=False).devices == ["0"]  # sm from cards.csv (12.0)


def _restart(box: StandIn, name: str):
    return C3Runner()("profile", "restart", name, "--no-wait", env=box.env, timeout=60)


def test_a_forced_profile_restarts_forced(box):
    uuids = nvidia_smi(box, [RTX3090])
    assert _launch(box, GB10, "--force", "--no-wait").returncode == 0
    result = _restart(box, GB10)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert [_gpus_of(r) for r in _runs(box)] == [f'"device={uuids[0]}"'] * 2


def test_a_restart_the_hardware_refuses_leaves_the_group_running(box):
    nvidia_smi(box, [RTX3090])
    assert _launch(box, LLAMA_1GPU, "--no-wait").returncode == 0
    before = len(box.calls())
    nvidia_smi(box, [("NVIDIA GeForce RTX 3060", 12288, "8.6")])  # the card changed under the profile
    result = _restart(box, LLAMA_1GPU)
    assert result.returncode == 1 and "12288 MiB < 24000 MiB" in result.stderr, (result.stdout, result.stderr)
    assert not [c for c in box.calls()[before:] if c[:1] in (["rm"], ["run"])], box.calls()[before:]


def test_this_machine_under_a_simulated_rig_is_judged_by_its_rig(box, tmp_path):
    rig = tmp_path / "rig.yaml"
    rig.write_text('gpus:\n  - {name: "NVIDIA GeForce RTX 3090", total_mib: 24576, sm: "8.6"}\n')
    result = C3Runner()("recipes", "launch", GB10, "--nodes", "here", "--no-wait", env={**box.env, "C3_RIG": str(rig)}, timeout=60)
    _refused(box, result, "compute capability 8.6 < 10.0")


def test_under_a_simulated_rig_only_this_c3s_own_containers_hold_its_gpus(box, tmp_path):
    """This machine's docker may run real c3 pods of another c3 home (the real-engine test tier on its fake
    NVML, a second user) whose GPU ids are the rig's too — index `0`, or the very UUID, derived from index
    and name alike: they hold none of the rig's pretend GPUs (the demo's launch plan changed with whatever
    else ran on the machine). A pod of this c3's own estate file given a rig GPU still holds it."""
    import json
    import re

    from backend import paths

    rig = tmp_path / "rig.yaml"
    rig.write_text('gpus:\n  - {name: "NVIDIA GeForce RTX 3090", total_mib: 24576, sm: "8.6"}\n'
                   '  - {name: "NVIDIA GeForce RTX 3090", total_mib: 24576, sm: "8.6"}\n')
    env = {**box.env, "C3_RIG": str(rig)}

    def picked() -> str:
        dry = C3Runner()("recipes", "launch", LLAMA_1GPU, "--nodes", "here", "--dry-run", env=env, timeout=60)
        assert dry.returncode == 0, (dry.stdout, dry.stderr)
        return re.findall(r"device=(GPU-[0-9a-f-]+)", dry.stdout)[0]

    first = picked()
    hold(box, "real-pod", ["0"])  # a real pod of another c3 on the real GPU 0 …
    assert picked() == first
    hold(box, "real-pod", [first])  # … or on a fake-NVML GPU whose derived UUID is the rig's GPU 0's
    assert picked() == first
    requests = [{"Driver": "nvidia", "Count": 0, "DeviceIDs": [first], "Capabilities": [["gpu"]]}]
    (box.tmp / "held").write_text(f"chat|<no value>|{json.dumps(requests)}||{paths.estate_file()}\n")  # this c3's own pod
    assert picked() != first
