"""Issue 24: every refusal of `shard start`'s pre-flight names its phase and its node, before anything
starts: a model path missing on one node (phase model), tp × pp against the GPUs and what a CPU build
cannot run (phase plan), `--stop-services` without sudo (phase services), and for `--backend rpc` a node
that cannot be probed (reach, exit 3) or whose llama.cpp build is missing or differs (versions).

Each node here is a fake shell that answers the facts probe with that node's own output (nothing else
is asked before these refusals); the model check itself runs for real on this machine."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from backend.errors import PhaseFailure
from backend.remote.node import Node
from backend.remote.shell import CommandResult
from backend.shard import rpc
from backend.shard.plan import ShardOptions
from backend.shard.prepare import prepare
from backend.shard.probe import facts_script, parse_facts

VLLM_PROBE = "ray_path=/r/ray\nray_version=2.60.0\nvllm_path=/v/vllm\nvllm_version=0.32.0\npython_path=/p\npython_version=3.11.7\n"
RPC_PROBE = ("rpc_server_path=/l/ggml-rpc-server\nllama_server_path=/l/llama-server\n"
             "llama_version=version: 7000 (abc123) built with cc\n")


class Shell:
    """A node that answers every script with its fixed probe output (and remembers the scripts)."""

    def __init__(self, name: str, output: str, *, local: bool = False) -> None:
        self.node = Node(name=name, host="http://127.0.0.1:1", ssh=f"root@{name}", local=local)
        self.output = output
        self.scripts: list[str] = []

    async def run(self, command, *, input=None, timeout=None, **_):
        self.scripts.append(command)
        return CommandResult(self.node.name, "probe", 0, self.output, "")


def refused(outputs: dict[str, str], **options: object) -> tuple[PhaseFailure, dict[str, Shell]]:
    shells = {name: Shell(name, out, local=i == 0) for i, (name, out) in enumerate(outputs.items())}  # c3 runs on the head
    values: dict[str, object] = {"backend": "mp", "model": "org/m", "tp": 1, "pp": 2, "gpus_per_node": 1, **options}
    with pytest.raises(PhaseFailure) as failure:
        run = rpc.prepare if values["backend"] == "rpc" else prepare
        asyncio.run(run([s.node for s in shells.values()], shells, ShardOptions(**values), secret_names=[]))  # type: ignore[arg-type]
    return failure.value, shells


def test_a_model_path_missing_on_one_node_fails_phase_model_on_that_node():
    failure, shells = refused({"a": VLLM_PROBE + "model=present\nprobe=done\n", "b": VLLM_PROBE + "model=missing\nprobe=done\n"},
                              model="/srv/models/tiny")
    assert failure.message == "phase model failed on node b: model path /srv/models/tiny does not exist on b"
    assert "same path on every node" in (failure.hint or "")
    assert all("[ -e /srv/models/tiny ]" in s.scripts[0] for s in shells.values())  # asked on every node


def test_a_hub_id_is_not_looked_for_on_disk():
    assert "model=" not in facts_script(ray="ray", vllm="vllm", python=None, check_sudo=False, model="org/m")
    assert "[ -e '/m/a b' ]" in facts_script(ray="ray", vllm="vllm", python=None, check_sudo=False, model="/m/a b")


def test_the_model_check_runs_on_the_node(tmp_path: Path):
    from backend.remote.local import LocalShell

    async def present(path: Path) -> bool | None:
        node = Node(name="here", host="http://127.0.0.1:1", ssh="u@127.0.0.1", local=True)
        result = await LocalShell(node).run(facts_script(ray="ray", vllm="vllm", python=None, check_sudo=False, model=str(path)), timeout=60)
        return parse_facts("here", result.stdout).model_present

    (tmp_path / "model").mkdir()
    assert asyncio.run(present(tmp_path / "model")) is True
    assert asyncio.run(present(tmp_path / "gone")) is False


def test_tp_times_pp_against_the_gpus_fails_phase_plan_naming_the_node_without_gpus():
    failure, _ = refused({"a": VLLM_PROBE + "gpus=1\nprobe=done\n", "b": VLLM_PROBE + "probe=done\n"}, gpus_per_node=None)
    assert failure.message.startswith("phase plan failed on node b: --tp 1 × --pp 2 = 2 GPUs, but the nodes have 1 (a: 1, b: 0)")
    assert "--gpus-per-node" in (failure.hint or "")
    failure, _ = refused({"a": VLLM_PROBE + "probe=done\n", "b": VLLM_PROBE + "probe=done\n"}, tp=2, pp=2)
    assert failure.message.startswith("phase plan failed on node a: --tp 2 × --pp 2 = 4 GPUs, but the nodes have 2")


def test_pp_with_enforce_eager_on_a_cpu_build_fails_phase_plan():
    cpu = VLLM_PROBE.replace("vllm_version=0.32.0", "vllm_version=0.32.0+cpu") + "probe=done\n"
    failure, _ = refused({"a": cpu, "b": cpu}, args=["--enforce-eager"])
    assert failure.message.startswith("phase plan failed on node a: vLLM 0.32.0+cpu (CPU build) with pipeline parallel and --enforce-eager")


def test_stop_services_without_sudo_fails_phase_services_on_that_node():
    failure, _ = refused({"a": VLLM_PROBE + "sudo=ok\nprobe=done\n", "b": VLLM_PROBE + "sudo=no sudo: a password is required\nprobe=done\n"},
                         stop_services=True)
    assert failure.message.startswith("phase services failed on node b: --stop-services needs passwordless sudo, which b lack")


RPC = {"backend": "rpc", "model": "/srv/big.gguf"}


def test_rpc_builds_that_differ_fail_phase_versions_on_the_odd_node():
    other = RPC_PROBE.replace("7000 (abc123)", "6999 (def456)")
    failure, _ = refused({"a": RPC_PROBE + "model=present\nprobe=done\n", "b": RPC_PROBE + "probe=done\n", "c": other + "probe=done\n"}, **RPC)
    assert failure.message.startswith("phase versions failed on node c: llama.cpp builds differ between nodes (")
    assert "c: version: 6999 (def456)" in failure.message


def test_rpc_server_missing_on_a_worker_fails_phase_versions_there():
    failure, _ = refused({"a": RPC_PROBE + "model=present\nprobe=done\n", "b": RPC_PROBE.replace("/l/ggml-rpc-server", "") + "probe=done\n"}, **RPC)
    assert failure.message.startswith("phase versions failed on node b: `ggml-rpc-server` not found on b")


def test_a_node_the_rpc_probe_cannot_read_fails_phase_reach_with_exit_3():
    failure, _ = refused({"a": RPC_PROBE + "model=present\nprobe=done\n", "b": "sh: 1: cannot fork\n"}, **RPC)
    assert failure.message == "phase reach failed on node b: could not probe b: sh: 1: cannot fork"
    assert failure.exit_code == 3


def test_the_gguf_is_looked_for_on_the_rpc_head_only():
    failure, shells = refused({"a": RPC_PROBE + "model=missing\nprobe=done\n", "b": RPC_PROBE + "probe=done\n"}, **RPC)
    assert failure.message == "phase model failed on node a: model path /srv/big.gguf does not exist on a"
    assert "[ -e /srv/big.gguf ]" in shells["a"].scripts[0] and "[ -e" not in shells["b"].scripts[0]


def test_a_worker_whose_name_resolves_to_this_machine_fails_phase_reach_before_any_connection(monkeypatch):
    """b's name resolving, on the head, to an address of the head (a `127.0.1.1 spark-b` line) made c3 drive b
    as this machine: rank 1 started on the head."""
    from backend.remote import node as node_module
    from backend.shard import ops, phases

    def resolve(host: str) -> tuple[str, ...]:
        return ("127.0.1.1",) if host == "spark-b" else ()

    monkeypatch.setattr(node_module, "resolved_addresses", resolve)
    monkeypatch.setattr(phases, "resolved_addresses", resolve)

    async def no_connection(nodes):
        raise AssertionError("connected before the names were checked")

    monkeypatch.setattr(ops, "open_shells", no_connection)
    head = Node(name="a", host="http://127.0.0.1:8000", ssh="u@127.0.0.1")
    worker = Node(name="b", host="http://spark-b:8000", ssh="u@spark-b")
    with pytest.raises(PhaseFailure) as failure:
        asyncio.run(ops.start([head, worker], ShardOptions(backend="mp", model="org/m", gpus_per_node=1), echo=print, dry_run=False))
    assert failure.value.message == ("phase reach failed on node b: b's name spark-b resolves to 127.0.1.1 here on the head (a), "
                                     "an address of this machine: b's part would run on a")
    assert "127.0.1.1 spark-b" in (failure.value.hint or "")
    # This machine on purpose: marked local, an address, or one of its own names.
    for meant in (Node(name="b", host="http://x:1", ssh="u@spark-b", local=True), Node(name="b", host="http://x:1", ssh="u@127.0.0.2"),
                  Node(name="b", host="http://x:1", ssh="u@localhost")):
        phases.check_names([head, meant])


LLAMA_70B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192, "num_hidden_layers": 80,
             "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 28672, "vocab_size": 128256,
             "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}


def test_a_model_too_big_for_a_nodes_gpu_fails_phase_plan_in_the_fits_words(tmp_path: Path):
    import json

    model = tmp_path / "llama-70b"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(LLAMA_70B))
    probe = VLLM_PROBE + "model=present\ngpus=1\n"
    failure, _ = refused({"a": probe + "gpu_name=NVIDIA H100 80GB HBM3, 81559\nprobe=done\n",
                          "b": probe + "gpu_name=NVIDIA GeForce RTX 3090, 24576\nprobe=done\n"},
                         model=str(model), gpus_per_node=None, args=["--max-model-len", "4096"])
    assert failure.message.startswith(f"phase plan failed on node b: {model} does not fit on the ranks' GPUs (a 79.6 GiB, b 24.0 GiB): "
                                      "24 GiB: no memory left for the KV cache (")  # the fit's own words for the rank that binds
    assert "c3 fit --config" in (failure.hint or "")


def test_the_probe_reads_each_gpus_memory():
    from backend.shard.probe import parse_facts

    facts = parse_facts("a", "gpus=2\ngpu_name=NVIDIA GeForce RTX 3090, 24576\ngpu_name=NVIDIA GB10, [N/A]\n")
    assert facts.gpu_names == ["NVIDIA GeForce RTX 3090", "NVIDIA GB10"] and facts.gpu_mib == []  # one without: unknown
    assert parse_facts("a", "gpus=1\ngpu_name=NVIDIA GB10\n").gpu_names == ["NVIDIA GB10"]
    facts = parse_facts("a", "gpus=1\ngpu_name=NVIDIA RTX A6000, 49140\n")
    assert facts.gpu_names == ["NVIDIA RTX A6000"] and facts.gpu_mib == [49140]


def test_a_model_that_fits_is_a_line_of_the_checks_and_an_unknown_memory_is_not_priced(tmp_path: Path):
    import json

    from backend.shard.fit_check import check_fit

    model = tmp_path / "llama-70b"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(LLAMA_70B))
    nodes = [Node(name=n, host="http://127.0.0.1:1", ssh=f"root@{n}", local=n == "a") for n in ("a", "b")]
    big = "gpus=2\n" + "gpu_name=NVIDIA H100 80GB HBM3, 81559\n" * 2
    facts = {n.name: parse_facts(n.name, big, local=n.local) for n in nodes}
    options = ShardOptions(backend="mp", model=str(model), tp=2, pp=2, args=["--max-model-len", "4096"])
    assert check_fit(nodes, facts, options, {"a": 2, "b": 2}) == "fit: tight on the ranks' GPUs (a 79.6 GiB, a 79.6 GiB, b 79.6 GiB, b 79.6 GiB)"  # weights estimated: tight, not refused
    facts["b"] = parse_facts("b", "", local=False)  # no nvidia-smi there (--gpus-per-node): not priced
    assert check_fit(nodes, facts, options, {"a": 2, "b": 2}) is None
