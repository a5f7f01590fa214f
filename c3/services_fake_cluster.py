"""The fake facade's Nodes and Recipes side: an in-memory node registry with fixed health, a running
pool (scenario `cluster`), the recipe catalogue, and the node/recipe writes with their plans."""

from __future__ import annotations

import re
import threading

from backend.errors import Refused
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
            return []
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
            lines = [f"recipe {request.recipe} → profile {request.recipe}; rank 0 ({request.nodes[0] if request.nodes else '?'}) serves http://…:8000/v1"]
            for rank, name in enumerate(request.nodes):
                node = self._nodes.get(name)
                how = "local, no SSH" if node and node.local else f"ssh {node.ssh if node else '?'}"
                lines += [
                    f"node {name} (rank {rank}, {how}):",
                    "  $ docker version --format '{{.Server.Version}}'",
                    f"  $ docker rm -f c3-{request.recipe}   # only if a previous one exists",
                    f"  write ~/.c3/run/{request.recipe}-{name}.env (mode 0600, sent on stdin): HF_TOKEN=<redacted>, VLLM_API_KEY=<redacted>",
                    f"  $ docker run -d --name c3-{request.recipe} --network host --gpus all --env-file ~/.c3/run/{request.recipe}-{name}.env vllm/vllm-openai@sha256:… serve",
                ]
            lines.append(f"then wait for rank 0; write profile {request.recipe} and make it active")
            return WritePlan("recipe_launch", f"Launch recipe {request.recipe}", tuple(lines), request.recipe, request, problems=problems)
        if kind == "recipe_stop":
            nodes = self._profile.nodes if self._profile else ()
            lines = tuple(f"node {n} (rank {i}): $ docker rm -f c3-{pod}" for i, n in enumerate(nodes)) + ("remember the stop: the watchdog leaves it stopped until the next launch",)
            return WritePlan("recipe_stop", f"Stop profile {pod}", lines, pod, problems=problems)
        raise Refused(f"unknown write {kind}")

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
            for line in ["preflight ok on " + ", ".join(request.nodes), *(f"{n}: rank {i} started (c3-{request.recipe})" for i, n in enumerate(request.nodes)), "rank 0 answers: HTTP 200"]:
                steps.append(line)
                progress(BootProgress(request.recipe, line, float(len(steps)), tuple(steps[-4:])))
            with self._cluster_lock:
                self._profile = ProfileRow(request.recipe, request.recipe, request.nodes, "http://127.0.0.1:8000/v1")
            progress(BootProgress(request.recipe, "serving", float(len(steps)), tuple(steps[-4:]), done=True, ok=True))
            return WriteResult(True, f"profile {request.recipe} is active: http://127.0.0.1:8000/v1", "point clients at it: eval \"$(c3 profile env)\"")
        raise Refused(f"unknown write {plan.kind}")
