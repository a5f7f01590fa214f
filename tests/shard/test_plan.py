"""Unit tests for the shard plan: head choice, GPU arithmetic, version/sudo/route refusals, commands."""

from __future__ import annotations

import pytest

from backend.errors import Refused, UsageError
from backend.remote.node import Node
from backend.shard.models import Interface, NodeFacts, Route
from backend.shard.plan import (
    ShardOptions,
    build_plan,
    check_routes,
    check_sudo,
    check_versions,
    choose_head_address,
    gpu_counts,
    order_nodes,
)
from backend.shard.render import describe, start_order

A = Node(name="a", host="http://192.168.1.10:8000", ssh="ubuntu@192.168.1.10")
B = Node(name="b", host="http://192.168.1.11:8000", ssh="ubuntu@192.168.1.11:2222")
C = Node(name="c", host="http://192.168.1.12:8000", ssh="ubuntu@192.168.1.12")


def facts(name: str, *, lan: str, link: str | None = None, gpus: int | None = 1, ray: str | None = "2.60.0",
          py: str | None = "3.12.3", sudo: bool | None = None, local: bool = False) -> NodeFacts:
    ifaces = [Interface(name="enP7s7", address=lan, prefix=24)]
    if link:
        ifaces.append(Interface(name="enp1s0f1np1", address=link, prefix=24))
    ifaces.append(Interface(name="docker0", address="172.17.0.1", prefix=16))
    return NodeFacts(node=name, local=local, interfaces=ifaces, gpus=gpus, ray_version=ray, python_version=py,
                     sudo_ok=sudo, sudo_error=None if sudo else "sudo: a password is required", vllm_path="/usr/bin/vllm")


def two_sparks() -> dict[str, NodeFacts]:
    return {
        "a": facts("a", lan="192.168.1.10", link="192.168.100.10", local=True),
        "b": facts("b", lan="192.168.1.11", link="192.168.100.11"),
    }


def opts(**kw) -> ShardOptions:
    return ShardOptions(model="Qwen/Qwen3-235B-A22B", **kw)


def test_defaults_are_pp2_tp1_and_head_is_first():
    o = opts()
    assert (o.tp, o.pp, o.backend) == (1, 2, "ray")
    assert [n.name for n in order_nodes([A, B], o)] == ["a", "b"]


def test_head_flag_moves_head_first_for_ray():
    assert [n.name for n in order_nodes([A, B, C], opts(head="b"))] == ["b", "a", "c"]


def test_mp_refuses_head_not_first_with_the_names():
    with pytest.raises(Refused) as exc:
        order_nodes([A, B], opts(backend="mp", head="b"))
    assert "head is b" in exc.value.message and "starts with a" in exc.value.message
    assert "--nodes b,a" in (exc.value.hint or "")


def test_head_not_in_nodes_and_single_node_are_usage_errors():
    with pytest.raises(UsageError):
        order_nodes([A, B], opts(head="zz"))
    with pytest.raises(UsageError):
        order_nodes([A], opts())


def test_tp_times_pp_must_equal_gpus_with_numbers():
    f = two_sparks()
    assert gpu_counts([A, B], f, opts(tp=2, pp=1)) == {"a": 1, "b": 1}
    with pytest.raises(Refused) as exc:
        gpu_counts([A, B], f, opts(tp=2, pp=2))
    assert exc.value.message == "--tp 2 × --pp 2 = 4 GPUs, but the nodes have 2 (a: 1, b: 1)"


def test_node_without_gpu_counts_zero_and_hints_override():
    f = two_sparks()
    f["b"] = f["b"].model_copy(update={"gpus": None})
    with pytest.raises(Refused) as exc:
        gpu_counts([A, B], f, opts())
    assert "the nodes have 1 (a: 1, b: 0)" in exc.value.message
    assert "--gpus-per-node" in (exc.value.hint or "")
    assert gpu_counts([A, B], f, opts(gpus_per_node=1)) == {"a": 1, "b": 1}


def test_mp_needs_even_gpus_per_node():
    f = two_sparks()
    f["b"] = f["b"].model_copy(update={"gpus": 3})
    assert gpu_counts([A, B], f, opts(tp=4, pp=1)) == {"a": 1, "b": 3}
    with pytest.raises(Refused, match="same number of GPUs"):
        gpu_counts([A, B], f, opts(tp=4, pp=1, backend="mp"))


def test_ray_and_python_versions_must_match():
    f = two_sparks()
    check_versions([A, B], f, "ray")
    f["b"] = f["b"].model_copy(update={"ray_version": "2.49.1"})
    with pytest.raises(Refused) as exc:
        check_versions([A, B], f, "ray")
    assert exc.value.message == "Ray versions differ between nodes (a: 2.60.0, b: 2.49.1)"
    check_versions([A, B], f, "mp")  # mp does not use Ray
    f["b"] = f["b"].model_copy(update={"ray_version": "2.60.0", "python_version": "3.11.7"})
    with pytest.raises(Refused) as exc:
        check_versions([A, B], f, "ray")
    assert exc.value.message == "Python versions differ between nodes (a: 3.12.3, b: 3.11.7)"


def test_missing_ray_is_refused_with_install_hint():
    f = two_sparks()
    f["b"] = f["b"].model_copy(update={"ray_version": None})
    with pytest.raises(Refused) as exc:
        check_versions([A, B], f, "ray")
    assert "not installed on b" in exc.value.message and "install-ray" in (exc.value.hint or "")


def test_stop_services_needs_passwordless_sudo_everywhere():
    f = {"a": facts("a", lan="10.0.0.1", sudo=True), "b": facts("b", lan="10.0.0.2", sudo=False)}
    with pytest.raises(Refused) as exc:
        check_sudo([A, B], f)
    assert "which b lack" in exc.value.message and "password is required" in exc.value.message
    f["b"] = facts("b", lan="10.0.0.2", sudo=True)
    check_sudo([A, B], f)


def test_head_address_prefers_a_link_every_worker_shares():
    f = two_sparks()
    f["a"] = facts("a", lan="192.168.1.10", link="192.168.100.10")
    f["b"] = facts("b", lan="10.9.9.11", link="192.168.100.11")  # LAN not shared, link is
    assert choose_head_address(A, f, [B], None) == "192.168.100.10"


def test_head_address_prefers_registry_address_among_shared_and_never_docker():
    f = two_sparks()
    assert choose_head_address(A, f, [B], None) == "192.168.1.10"
    assert choose_head_address(A, f, [B], "192.168.100.10") == "192.168.100.10"
    with pytest.raises(Refused, match="not an address of a"):
        choose_head_address(A, f, [B], "10.1.2.3")
    with pytest.raises(UsageError):
        choose_head_address(A, f, [B], "not-an-ip")


def test_unreachable_head_is_refused_with_each_worker_reason():
    routes = {
        "b": Route(node="b", error="no route (Network is unreachable)"),
        "c": Route(node="c", interface="eth0", source="192.168.1.12", connected=False, error="TCP connect failed: Connection timed out"),
    }
    with pytest.raises(Refused) as exc:
        check_routes("192.168.1.10", 6379, routes)
    assert exc.value.message.startswith("head address 192.168.1.10:6379 is not reachable from b, c")
    assert "Network is unreachable" in exc.value.message and "timed out" in exc.value.message


def test_route_through_a_bridge_is_refused():
    with pytest.raises(Refused, match="docker0"):
        check_routes("172.17.0.1", 6379, {"b": Route(node="b", interface="docker0", source="172.17.0.2", connected=True)})


def routes_b() -> dict[str, Route]:
    return {"b": Route(node="b", interface="enp1s0f1np1", source="192.168.100.11", connected=True)}


def test_ray_plan_env_per_node_and_start_order():
    plan = build_plan([A, B], two_sparks(), routes_b(), opts(tp=2, pp=1, head_address="192.168.100.10"), head_address="192.168.100.10")
    head, worker = plan.parts
    assert head.env["VLLM_HOST_IP"] == "192.168.100.10" and head.env["NCCL_SOCKET_IFNAME"] == "enp1s0f1np1"
    assert worker.env == {"VLLM_HOST_IP": "192.168.100.11", "NCCL_SOCKET_IFNAME": "enp1s0f1np1", "GLOO_SOCKET_IFNAME": "enp1s0f1np1"}
    assert head.steps[0].argv[:4] == ["ray", "start", "--head", "--block"]
    assert "--node-ip-address=192.168.100.10" in head.steps[0].argv
    assert worker.steps[0].argv[worker.steps[0].argv.index("--block") + 1] == "--address=192.168.100.10:6379"
    serve = head.steps[1]
    assert serve.argv[:3] == ["vllm", "serve", "Qwen/Qwen3-235B-A22B"]
    assert serve.argv[serve.argv.index("--tensor-parallel-size") + 1] == "2"
    assert serve.argv[serve.argv.index("--distributed-executor-backend") + 1] == "ray"
    assert serve.env == {"RAY_ADDRESS": "192.168.100.10:6379"}
    assert start_order(plan) == [("a", 0), ("b", 0), ("a", 1)]
    assert worker.ssh == "ubuntu@192.168.1.11:2222" and head.local and head.ssh is None


def test_mp_command_line_for_every_rank():
    nodes = [A, B, C]
    f = {"a": facts("a", lan="192.168.1.10", gpus=2, local=True), "b": facts("b", lan="192.168.1.11", gpus=2),
         "c": facts("c", lan="192.168.1.12", gpus=2)}
    routes = {n: Route(node=n, interface="enP7s7", source=f[n].interfaces[0].address, connected=True) for n in ("b", "c")}
    o = opts(backend="mp", tp=2, pp=3, api_port=8011, master_port=29555, vllm="/opt/vllm/bin/vllm", args=["--max-model-len", "8192"])
    plan = build_plan(nodes, f, routes, o, head_address="192.168.1.10")
    common = ["/opt/vllm/bin/vllm", "serve", "Qwen/Qwen3-235B-A22B", "--tensor-parallel-size", "2", "--pipeline-parallel-size", "3",
              "--distributed-executor-backend", "mp", "--nnodes", "3"]
    for rank, part in enumerate(plan.parts):
        (step,) = part.steps
        tail = ["--port", "8011"] if rank == 0 else ["--headless"]
        assert step.argv == common + ["--node-rank", str(rank), "--master-addr", "192.168.1.10", "--master-port", "29555"] + tail + ["--max-model-len", "8192"]
        assert part.env["MASTER_ADDR"] == "192.168.1.10"
        assert part.env["VLLM_HOST_IP"] == f[part.node].interfaces[0].address
    assert start_order(plan) == [("a", 0), ("b", 0), ("c", 0)]
    assert plan.tag == "a-29555"


def test_dry_run_text_hides_secrets_and_shows_env_per_node():
    o = opts(tp=2, pp=1, env={"HF_TOKEN": "hf_supersecret", "NCCL_DEBUG": "INFO", "NCCL_X": "1"}, public_env=["NCCL_DEBUG", "HF_TOKEN"],
             stop_services=True)
    plan = build_plan([A, B], two_sparks(), routes_b(), o, head_address="192.168.1.10")
    text = "\n".join(describe(plan, checks=["x"]))
    assert "hf_supersecret" not in text and "HF_TOKEN=<hidden>" in text
    assert "NCCL_DEBUG=INFO" in text
    assert "[a] head (rank 0), local" in text and "[b] worker (rank 1), ssh ubuntu@192.168.1.11:2222" in text
    assert "sudo -n systemctl stop vllm.service" in text
    assert plan.secret_env == ["HF_TOKEN", "NCCL_X"] and "NCCL_X=<hidden>" in text  # not public: secret by default


@pytest.mark.parametrize("name", ["x; rm -rf /", "--host=x@evil", "-H"])
def test_bad_service_name_is_refused(name):
    """Issue 24: a name starting with `-` (read by systemctl as an option) is refused too."""
    with pytest.raises(UsageError, match="not a systemd unit name"):
        build_plan([A, B], two_sparks(), routes_b(), opts(tp=2, pp=1, stop_services=True, service_name=name), head_address="192.168.1.10")


def test_vllm_versions_must_match_where_known():
    f = two_sparks()
    f["a"] = f["a"].model_copy(update={"vllm_version": "0.11.0"})
    check_versions([A, B], f, "ray")  # b unknown (e.g. read failed): nothing to compare
    f["b"] = f["b"].model_copy(update={"vllm_version": "0.10.2"})
    with pytest.raises(Refused) as exc:
        check_versions([A, B], f, "mp")
    assert exc.value.message == "vLLM versions differ between nodes (a: 0.11.0, b: 0.10.2)"


def test_gb10_nodes_get_ray_memory_monitor_off_for_ray_only():
    f = two_sparks()
    f = {k: v.model_copy(update={"gpu_names": ["NVIDIA GB10"]}) for k, v in f.items()}
    plan = build_plan([A, B], f, routes_b(), opts(tp=2, pp=1), head_address="192.168.1.10")
    assert all(p.env.get("RAY_memory_monitor_refresh_ms") == "0" for p in plan.parts)
    mp = build_plan([A, B], f, routes_b(), opts(tp=2, pp=1, backend="mp"), head_address="192.168.1.10")
    assert not any("RAY_memory_monitor_refresh_ms" in p.env for p in mp.parts)
