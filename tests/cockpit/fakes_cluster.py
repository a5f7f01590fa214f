"""The fake facade's Nodes and Recipes side: an in-memory node registry with fixed health, a running
pool (scenario `cluster`), the recipe catalogue, and the node/recipe writes with their plans."""

from __future__ import annotations

import re
import shlex
import threading
from typing import Any

from backend.errors import C3Error, Refused
from c3.services import (
    BootProgress,
    NewNode,
    NodeGpuRow,
    NodeRow,
    PoolBackendRow,
    PoolRow,
    ProfileRow,
    ProgressCallback,
    RecipeLaunch,
    RecipeRow,
    WriteKind,
    WritePlan,
    WriteResult,
)

CLUSTER_KINDS = frozenset({"node_add", "node_rm", "recipe_launch", "recipe_stop"})
NODES_FILE = "~/.config/c3/nodes.json"

_RECIPES = [
    RecipeRow("qwen3-32b-2x3090", "2× RTX 3090", 1, "vllm/vllm-openai@sha256:4be1…", True, "Qwen3-32B AWQ, TP=2", "measured 2026-04-30 on box", ("decode 41.7 tok/s", "TTFT 180 ms @ 2k")),
    RecipeRow("gpt-oss-120b-2xspark", "2× DGX Spark", 2, "vllm/vllm-openai@sha256:91ac…", False, "gpt-oss-120b, TP=2 over Ray", "unverified", ()),
]


# The catalogue rows above as the backend's own `Recipe`s, so that the demo's `--set` entries go through
# the real parser and known-abort rules. Built on first use: the pydantic models cost ~0.3 s to import.
_SPECS: dict[str, Any] = {}


def _spec(recipe_id: str) -> Any:
    if not _SPECS:
        from backend.recipes import Recipe

        serve = ["serve", "{model}", "--port", "{port}", "--tensor-parallel-size", "{tensor_parallel_size}", "--max-model-len", "{max_model_len}", "--gpu-memory-utilization", "{gpu_memory_utilization}"]
        _SPECS["qwen3-32b-2x3090"] = Recipe.model_validate({
            "id": "qwen3-32b-2x3090", "model": "Qwen/Qwen3-32B-AWQ", "image": "vllm/vllm-openai@sha256:" + "4be1" * 16, "nodes": 1,
            "hardware": {"id": "2x-rtx3090", "description": "2× RTX 3090", "gpu": "NVIDIA GeForce RTX 3090", "gpus_per_node": 2},
            "defaults": {"port": 8000, "tensor_parallel_size": 2, "max_model_len": 16384, "gpu_memory_utilization": 0.92},
            "command": serve,
            # vLLM refuses a max_model_len above the model's max_position_embeddings (40960 for Qwen3-32B).
            "known_aborts": [{"key": "max_model_len", "op": ">", "value": 40960, "hardware": "*", "why": "above the model's 40960 positions: vLLM refuses to start"}],
        })
        _SPECS["gpt-oss-120b-2xspark"] = Recipe.model_validate({
            "id": "gpt-oss-120b-2xspark", "model": "openai/gpt-oss-120b", "image": "vllm/vllm-openai@sha256:" + "91ac" * 16, "nodes": 2,
            "hardware": {"id": "2x-gb10", "description": "2× DGX Spark", "gpu": "NVIDIA GB10"},
            "defaults": {"port": 8000, "tensor_parallel_size": 2, "max_model_len": 32768, "gpu_memory_utilization": 0.8},
            "command": serve,
            # Demo rule: unified memory leaves nothing for the OS above this share.
            "known_aborts": [{"key": "gpu_memory_utilization", "op": ">", "value": 0.9, "hardware": "2x-gb10", "why": "GB10 memory is shared with the OS: the engine is OOM-killed while loading"}],
        })
    return _SPECS.get(recipe_id)


def _spark_gpu(used: int) -> tuple[NodeGpuRow, ...]:
    return (NodeGpuRow(0, "NVIDIA GB10", 122570, used),)


class FakeCluster:
    """Mixin for `FakeServices`: needs `scenario`, `readonly`, `_gpus`, `gpu_snapshots`, `_record`."""

    def _init_cluster(self, scenario: str) -> None:
        self._cluster_lock = threading.Lock()
        self._nodes: dict[str, NodeRow] = {}
        self._profile: ProfileRow | None = None
        if scenario == "empty":
            return
        box = NodeRow("box", "http://127.0.0.1:8000", "me@127.0.0.1", True, True, "this machine, no SSH", True, "http://127.0.0.1:8000/health: HTTP 200", (), None)
        self._nodes["box"] = box
        if scenario == "cluster":
            self._nodes["spark-1"] = NodeRow("spark-1", "http://10.213.0.11:8000", "ubuntu@10.213.0.11", False, True, "ssh ok", True, "HTTP 200", _spark_gpu(98304))
            self._profile = ProfileRow("gpt-oss-120b-2xspark", "gpt-oss-120b-2xspark", ("spark-1", "spark-2"), "http://10.213.0.11:8000/v1")
        self._nodes["spark-2"] = NodeRow("spark-2", "http://10.213.0.12:8000", "ubuntu@10.213.0.12", False, False, "ssh: connection timed out after 4 s", False, "timed out", (), "node not reachable")

    # -- reads -----------------------------------------------------------------------------------
    def nodes(self) -> list[NodeRow]:
        self._record("nodes")  # type: ignore[attr-defined]
        gpus = tuple(NodeGpuRow(s.gpu.index, s.gpu.name, s.gpu.total_mib, s.used_mib) for s in self.gpu_snapshots())  # type: ignore[attr-defined]
        with self._cluster_lock:
            rows = list(self._nodes.values())
        return [NodeRow(**{**r.__dict__, "gpus": gpus}) if r.local else r for r in rows]

    def registered_nodes(self) -> list[NodeRow]:
        self._record("registered_nodes")  # type: ignore[attr-defined]
        with self._cluster_lock:
            return [NodeRow(r.name, r.host, r.ssh, r.local, ssh_key=r.ssh_key) for r in self._nodes.values()]

    def pools(self) -> list[PoolRow]:
        self._record("pools")  # type: ignore[attr-defined]
        if self.scenario != "cluster":  # type: ignore[attr-defined]
            return []
        backends = (
            PoolBackendRow("spark-1", "http://10.213.0.11:8000", "up", True, False, False, 7, 18412, 3, 41.2, 212.5),
            PoolBackendRow("box", "http://127.0.0.1:8000", "up", True, True, False, 0, 9120, 0, 38.7, 190.1),
            PoolBackendRow("spark-2", "http://10.213.0.12:8000", "down", False, False, False, 0, 6033, 57, None, None, "connect timed out"),
        )
        return [PoolRow("0.0.0.0:8011", "auto", 48213, True, None, 41, 0.87, 7260.0, backends)]

    def active_profile(self) -> ProfileRow | None:
        self._record("active_profile")  # type: ignore[attr-defined]
        with self._cluster_lock:
            return self._profile

    def recipes(self) -> list[RecipeRow] | None:
        self._record("recipes")  # type: ignore[attr-defined]
        return [] if self.scenario == "empty" else list(_RECIPES)  # type: ignore[attr-defined]

    def override_problems(self, recipe: str, overrides: tuple[str, ...]) -> list[str]:
        self._record("override_problems")  # type: ignore[attr-defined]
        from backend.recipes import check_overrides, parse_overrides

        spec = _spec(recipe)
        if spec is None:
            return [f"unknown recipe `{recipe}`"]
        problems = []
        for pair in overrides:
            try:
                check_overrides(spec, parse_overrides(spec, [pair]))
            except C3Error as error:
                problems.append(error.message + (f" — hint: {error.hint}" if error.hint else ""))
        return problems

    # -- writes ----------------------------------------------------------------------------------
    def cluster_problems(self, kind: WriteKind, pod: str | None, request: object) -> list[str]:
        if self.readonly:  # type: ignore[attr-defined]
            return ["read-only cockpit: writes are refused"]
        with self._cluster_lock:
            names = set(self._nodes)
            profile = self._profile
        if kind == "node_add" and isinstance(request, NewNode):
            problems = []
            if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", request.name):
                problems.append(f"node name `{request.name}` must match [a-z0-9][a-z0-9_-]*")
            if request.name in names:
                problems.append(f"node `{request.name}` is already registered")
            return problems
        if kind == "node_rm":
            return [] if pod in names else [f"node `{pod}` is not registered"]
        if kind == "recipe_launch" and isinstance(request, RecipeLaunch):
            recipe = next((r for r in _RECIPES if r.id == request.recipe), None)
            if recipe is None:
                return [f"unknown recipe `{request.recipe}`"]
            missing = [n for n in request.nodes if n not in names]
            if missing:
                return [f"node(s) not registered: {', '.join(missing)}"]
            if len(request.nodes) != recipe.nodes:
                return [f"recipe `{recipe.id}` runs on {recipe.nodes} node(s); {len(request.nodes)} chosen — hint: measured on {recipe.hardware}"]
            return self.override_problems(request.recipe, request.overrides)
        if kind == "recipe_stop":
            return [] if profile is not None and profile.name == pod else [f"no profile `{pod}`"]
        return [f"unknown write {kind}"]

    def cluster_plan(self, kind: WriteKind, pod: str | None, request: object) -> WritePlan:
        problems = tuple(self.cluster_problems(kind, pod, request))
        if kind == "node_add" and isinstance(request, NewNode):
            lines = (f"add node {request.name} to {NODES_FILE} (mode 0600):", f"  host     {request.host}", f"  ssh      {request.ssh}",
                     f"  ssh key  {request.ssh_key or '(the agent' + chr(39) + 's or the default key)'}", "a node whose host is this machine is driven without SSH")
            return WritePlan("node_add", f"Add node {request.name}", lines, request.name, request, problems=problems)
        if kind == "node_rm":
            node = self._nodes.get(pod or "")
            where = f" ({node.host}, ssh {node.ssh})" if node else ""
            return WritePlan("node_rm", f"Remove node {pod}", (f"remove node {pod}{where} from {NODES_FILE}", "nothing on the node itself is touched"), pod, problems=problems)
        if kind == "recipe_launch" and isinstance(request, RecipeLaunch):
            lines = self._launch_lines(request)
            return WritePlan("recipe_launch", f"Launch recipe {request.recipe}", tuple(lines), request.recipe, request, problems=problems)
        if kind == "recipe_stop":
            nodes = self._profile.nodes if self._profile else ()
            lines = tuple(f"node {n} (rank {i}): $ docker rm -f c3-profile_{pod}" for i, n in enumerate(nodes)) + ("remember the stop: the watchdog leaves it stopped until the next launch",)
            return WritePlan("recipe_stop", f"Stop profile {pod}", lines, pod, problems=problems)
        raise Refused(f"unknown write {kind}")

    def _launch_lines(self, request: RecipeLaunch) -> list[str]:
        """The demo's dry-run, shaped like `LaunchPlan.describe()`: overrides applied to the command."""
        from backend.recipes import parse_overrides

        profile = request.recipe
        container = f"c3-profile_{profile}"
        spec = _spec(request.recipe)
        try:
            overrides = parse_overrides(spec, list(request.overrides)) if spec else {}
        except C3Error as error:
            return [f"launch {request.recipe} on {', '.join(request.nodes) or 'no nodes'}: {error.message}"]
        params = {**(spec.defaults if spec else {}), **{k: v for k, v in overrides.items() if k != "image"}}
        image = str(overrides.get("image", spec.image if spec else "vllm/vllm-openai"))
        argv = [a.format_map({**params, "model": spec.model}) for a in spec.command] if spec else ["serve"]
        lines = [f"recipe {request.recipe} → profile {profile}; rank 0 ({request.nodes[0] if request.nodes else '?'}) serves http://…:{params.get('port', 8000)}/v1"]
        if overrides:
            lines.append("local overrides: " + ", ".join(f"{k}={v}" for k, v in overrides.items()) + " (recipe + local overrides: no verified numbers)")
        for rank, name in enumerate(request.nodes):
            node = self._nodes.get(name)
            how = "local, no SSH" if node and node.local else f"ssh {node.ssh if node else '?'}"
            env = f"~/.c3/run/{profile}-{name}.env"
            lines += [
                f"node {name} (rank {rank}, {how}):",
                "  $ docker version --format '{{.Server.Version}}'",
                f"  $ docker rm -f {container}   # only if a previous one exists",
                f"  write {env} (mode 0600, sent on stdin): HF_TOKEN=<redacted>, VLLM_API_KEY=<redacted>",
                f"  $ docker run -d --name {container} --network host --gpus all --env-file {env} {shlex.join([image, *argv])}",
            ]
        lines.append(f"then wait for rank 0; write profile {profile} and make it active")
        return lines

    def cluster_execute(self, plan: WritePlan, progress: ProgressCallback) -> WriteResult:
        problems = self.cluster_problems(plan.kind, plan.pod, plan.request)
        if problems:
            raise Refused(problems[0])
        request = plan.request
        with self._cluster_lock:
            if plan.kind == "node_add" and isinstance(request, NewNode):
                local = bool(re.search(r"@(127\.|localhost)", request.ssh))
                self._nodes[request.name] = NodeRow(request.name, request.host, request.ssh, local, True if local else None, "this machine, no SSH" if local else "not probed yet", ssh_key=request.ssh_key)
                return WriteResult(True, f"added node {request.name}: {request.host}", "it is probed on the next refresh")
            if plan.kind == "node_rm" and plan.pod:
                del self._nodes[plan.pod]
                return WriteResult(True, f"removed node {plan.pod} from the registry")
            if plan.kind == "recipe_stop" and plan.pod and self._profile:
                self._profile = ProfileRow(**{**self._profile.__dict__, "stopped": True})
                return WriteResult(True, f"stopped profile {plan.pod} on {', '.join(self._profile.nodes)}", "the stop is remembered: the watchdog leaves it stopped")
        if plan.kind == "recipe_launch" and isinstance(request, RecipeLaunch):
            steps: list[str] = []
            for line in ["preflight ok on " + ", ".join(request.nodes), *(f"{n}: rank {i} started (c3-profile_{request.recipe})" for i, n in enumerate(request.nodes)), "rank 0 answers: HTTP 200"]:
                steps.append(line)
                progress(BootProgress(request.recipe, line, float(len(steps)), tuple(steps[-4:])))
            with self._cluster_lock:
                self._profile = ProfileRow(request.recipe, request.recipe, request.nodes, "http://127.0.0.1:8000/v1")
            progress(BootProgress(request.recipe, "serving", float(len(steps)), tuple(steps[-4:]), done=True, ok=True))
            return WriteResult(True, f"profile {request.recipe} is active: http://127.0.0.1:8000/v1", "point clients at it: eval \"$(c3 profile env)\"")
        raise Refused(f"unknown write {plan.kind}")
