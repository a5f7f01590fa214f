"""The real facade's Nodes/Recipes side over NODES' and POOL's backends: the registry written (the
node actions) and probed (c3/services_cluster.py), a router's live status read over HTTP on loopback,
and a recipe launch's plan (the dry-run) with its refusals and no secret in it."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from backend.actions.registry import build
from backend.errors import C3Error
from c3.services import BootProgress, NewNode, RecipeLaunch
from c3.services_cluster import node_rows, pool_rows

RECIPE = "spark2-vllm-qwen3-235b-a22b-gptq-int4"


def cluster_plan(key: str, target: str | None, request: object) -> SimpleNamespace:
    """What the confirm gate gets for a node or recipe write (as the facade builds it)."""
    action = build(key, None, target, request)
    plan = action.plan()
    return SimpleNamespace(action=action, title=plan.title, lines=plan.lines, problems=tuple(p.text() for p in action.problems()))


def cluster_problems(key: str, target: str | None, request: object) -> list[str]:
    return [p.text() for p in build(key, None, target, request).problems()]


def cluster_execute(plan: SimpleNamespace, progress) -> object:
    return plan.action.run(progress)


def _add(name: str, host: str, ssh: str) -> None:
    plan = cluster_plan("node_add", None, NewNode(name, host, ssh))
    assert plan.problems == ()
    result = cluster_execute(plan, lambda _p: None)
    assert result.ok and f"added node {name}" in result.message


def no_nvml() -> list:
    from backend.errors import EnvironmentProblem

    raise EnvironmentProblem("NVML is not available")


def test_add_probe_and_remove_a_local_node():
    plan = cluster_plan("node_add", None, NewNode("Bad Name", "ftp://x", "nobody"))
    assert any("node name" in p for p in plan.problems) and any("http(s) URL" in p for p in plan.problems) and any("USER@HOST" in p for p in plan.problems)
    # A loopback endpoint nobody listens on: reachable (this machine, no SSH), endpoint down.
    _add("here", "http://127.0.0.1:9", "me@127.0.0.1")
    assert cluster_problems("node_add", None, NewNode("here", "http://127.0.0.1:9", "me@127.0.0.1")) == ["node `here` is already registered — hint: `c3 node rm here` first"]
    [row] = node_rows(SimpleNamespace(gpu_snapshots=no_nvml))
    assert row.name == "here" and row.local and row.reachable is True
    assert row.endpoint_ok is False
    assert row.gpus == () and row.gpu_error == "NVML is not available"  # the facade's own GPU probe said why
    # This machine's GPUs are the facade's reading (the simulated rig's in the demo, NVML's on a real host).
    from datetime import UTC, datetime

    from backend.models import Gpu, GpuSnapshot

    snap = GpuSnapshot(gpu=Gpu(index=0, uuid="GPU-x", name="NVIDIA GeForce RTX 3090", total_mib=24576), taken_at=datetime.now(UTC), used_mib=512)
    [demo_row] = node_rows(SimpleNamespace(gpu_snapshots=lambda: [snap]))
    assert [g.name for g in demo_row.gpus] == ["NVIDIA GeForce RTX 3090"] and demo_row.gpu_error is None
    plan = cluster_plan("node_rm", "here", None)
    assert plan.title == "Remove node here" and "nodes.json" in plan.lines[0]
    assert cluster_execute(plan, lambda _p: None).ok
    assert node_rows(SimpleNamespace(gpu_snapshots=no_nvml)) == []
    assert cluster_problems("node_rm", "here", None) == ["node `here` is not registered — hint: `c3 node ls` lists the registered nodes"]


def test_launch_plan_is_the_dry_run_without_secrets_and_refusals_are_problems(monkeypatch):
    secret = "hf_do-not-show-" + "7" * 12
    monkeypatch.setenv("HF_TOKEN", secret)
    _add("a", "http://127.0.0.1:18000", "me@127.0.0.1")
    _add("b", "http://127.0.0.2:18000", "me@127.0.0.2")
    plan = cluster_plan("recipe_launch", None, RecipeLaunch(RECIPE, ("a", "b")))
    text = "\n".join(plan.lines)
    assert secret not in text and secret not in repr(plan)
    assert "HF_TOKEN=<redacted>" in text
    assert "node a (rank 0, local, no SSH):" in text and "node b (rank 1, local, no SSH):" in text
    assert any("not pinned by digest" in p for p in plan.problems)  # the built-in image is a tag
    allowed = cluster_plan("recipe_launch", None, RecipeLaunch(RECIPE, ("a", "b"), allow_unpinned=True))
    # This machine has no GPU: the GB10 recipe's hardware is refused before anything runs, and --force
    # turns that into a warning line in the plan (backend/cluster/hardware.py).
    assert [p for p in allowed.problems if "lists no GPUs" in p and "--force" in p] == list(allowed.problems) != []
    forced = cluster_plan("recipe_launch", None, RecipeLaunch(RECIPE, ("a", "b"), allow_unpinned=True, force=True))
    assert forced.problems == () and any(line.startswith("warning:") and "no GPUs" in line for line in forced.lines)
    one = cluster_plan("recipe_launch", None, RecipeLaunch(RECIPE, ("a",), allow_unpinned=True))
    assert any("runs on 2 node(s)" in p for p in one.problems)
    assert cluster_problems("recipe_launch", None, RecipeLaunch(RECIPE, ("a", "ghost"), True))[0].startswith("node(s) not registered: ghost")
    assert cluster_problems("recipe_stop", "nope", None)[0].startswith("no profile `nope`")


def test_a_launch_that_fails_reports_progress_and_raises(monkeypatch):
    # Two local nodes whose docker lacks the image (or has no docker): preflight refuses, nothing starts.
    _add("a", "http://127.0.0.1:18000", "me@127.0.0.1")
    _add("b", "http://127.0.0.2:18000", "me@127.0.0.2")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    plan = cluster_plan("recipe_launch", None, RecipeLaunch(RECIPE, ("a", "b"), allow_unpinned=True, force=True))  # no GPU here
    steps: list[BootProgress] = []
    with pytest.raises(C3Error):  # NodeFailure (docker/image) names the node
        cluster_execute(plan, steps.append)
    assert steps[0].phase.startswith("launching ") and steps[-1].done and not steps[-1].ok


class _Admin(BaseHTTPRequestHandler):
    body = b"{}"

    def do_GET(self):
        self.send_response(200 if self.path == "/c3/status" else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


def test_pool_rows_read_a_running_router_over_http():
    assert pool_rows() == []
    status = {
        "sticky": "auto", "pins": 3, "sticky_hit_ratio": 0.75, "uptime_s": 120.0,
        "backends": [
            {"node": "a", "url": "http://127.0.0.1:18000", "healthy": True, "state": "up", "in_flight": 2, "requests": 40, "errors": 1, "latency_ms": {"p50": 4.0, "p99": 19.5}},
            {"node": "b", "url": "http://127.0.0.2:18000", "healthy": False, "state": "down", "draining": True, "last_error": "connect refused"},
        ],
    }
    _Admin.body = json.dumps(status).encode()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Admin)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        from backend.pool.status import status_file, write_status_file

        port = server.server_address[1]
        write_status_file(port, "127.0.0.1", ["a", "b"], "auto")  # our pid: the router is "alive"
        [pool] = pool_rows()
        assert pool.bind == f"127.0.0.1:{port}" and pool.reachable and pool.pins == 3 and pool.hit_ratio == 0.75
        a, b = pool.backends
        assert (a.node, a.in_flight, a.requests, a.errors, a.p50_ms, a.p99_ms) == ("a", 2, 40, 1, 4.0, 19.5)
        assert b.draining and not b.healthy and b.state == "down" and b.p50_ms is None
    finally:
        server.shutdown()
        server.server_close()
        status_file(server.server_address[1]).unlink(missing_ok=True)
    assert os.getpid()  # the status file named us; nothing else was started


def test_launch_overrides_through_the_backend_parser_and_known_aborts():
    import yaml

    from backend import paths
    from backend.recipes import BUILTIN_DIR
    from c3.services_cluster import override_problems

    _add("a", "http://127.0.0.1:18000", "me@127.0.0.1")
    _add("b", "http://127.0.0.2:18000", "me@127.0.0.2")
    plan = cluster_plan("recipe_launch", None, RecipeLaunch(RECIPE, ("a", "b"), True, ("max_model_len=8192",), force=True))  # no GPU here
    text = "\n".join(plan.lines)
    assert plan.problems == ()
    assert "--max-model-len 8192" in text and "--max-model-len 32768" not in text
    assert "recipe + local overrides: no verified numbers" in text
    typo, unknown = override_problems(RECIPE, ("max_model_len=8k", "nope=1"))
    assert typo == "--set max_model_len: `8k` is not an integer"
    assert unknown.startswith(f"--set nope: recipe `{RECIPE}` has no parameter `nope`") and "max_model_len" in unknown
    # A user recipe with a known abort: refused in the plan's problems, before any node is touched.
    spec = yaml.safe_load((BUILTIN_DIR / "spark2-vllm-qwen3-235b.yaml").read_text())
    spec.update(id="aborty", known_aborts=[{"key": "gpu_memory_utilization", "op": ">", "value": 0.9, "hardware": "2x-gb10", "why": "OOM at load"}])
    paths.user_recipes_dir().mkdir(parents=True, exist_ok=True)
    (paths.user_recipes_dir() / "aborty.yaml").write_text(yaml.safe_dump(spec))
    request = RecipeLaunch("aborty", ("a", "b"), True, ("gpu_memory_utilization=0.95",), force=True)
    assert override_problems("aborty", request.overrides)[0].startswith("gpu_memory_utilization=0.95 is known to abort on 2x-gb10: OOM at load")
    refused = cluster_plan("recipe_launch", None, request)
    assert any("known to abort on 2x-gb10" in p for p in refused.problems)
    assert "--gpu-memory-utilization 0.95" in "\n".join(refused.lines)  # the gate still shows what it would run
