"""Turn a recipe, its nodes and local overrides into the exact commands each node will run.

The same plan is what `--dry-run` prints and what launch executes, so the preview cannot drift from
the real thing. Secrets (the API key, HF_TOKEN, and every recipe env entry not listed in `public_env`
or that looks like a credential: backend.secrets_env) are never part of a command: they go into a
0600 env file uploaded on stdin and passed with `--env-file`.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from urllib.parse import urlparse

from backend import limits, paths
from backend.cluster.addresses import GroupAddresses, placeholders
from backend.cluster.hardware import NodeGpus, RankGpus, gpus_arg, pick
from backend.errors import Refused, UsageError
from backend.models.names import host_url
from backend.profiles import check_name
from backend.recipes import ParamValue, Recipe, check_overrides, check_values, port_problem, template
from backend.remote.node import Node
from backend.remote.shell import shell_path
from backend.secrets_env import check_env_file, split_secrets
from backend.settings import current

LABEL_PROFILE = "io.c3.profile"


@dataclass
class RankPlan:
    """What one node does."""

    rank: int
    """0 serves the API."""
    node: Node
    """The registered node."""
    container: str
    """Container name on that node."""
    run_argv: list[str]
    """`docker run …` (no secret in it)."""
    env_file: str | None
    """Path of the 0600 env file on the node, when there are secrets."""
    secret_names: list[str] = field(default_factory=list)
    """Names of the variables in the env file (values are never shown)."""

    @property
    def address(self) -> str:
        return self.node.address or self.node.ssh_host


@dataclass
class LaunchPlan:
    """Every node's commands, in rank order."""

    recipe: Recipe
    profile: str
    params: dict[str, ParamValue]
    image: str
    overrides: dict[str, ParamValue]
    ranks: list[RankPlan]
    base_url: str
    secrets: dict[str, str] = field(default_factory=dict, repr=False)
    """Secret values by name; only ever written into env files."""
    addresses: GroupAddresses | None = None
    """The ranks' network addresses (placeholders until resolved on the nodes); None for one node."""
    nodes: list[Node] = field(default_factory=list)
    """The nodes in rank order (to render again once the addresses are known)."""
    allow_unpinned: bool = False
    hardware: dict[str, NodeGpus] | None = None
    """What the nodes said about their GPUs (backend.cluster.hardware); None: not asked yet."""
    force: bool = False
    """`--force`: a hardware mismatch is a warning, not a refusal."""
    warnings: list[str] = field(default_factory=list)
    """Hardware lines the plan shows first (forced mismatches, facts that could not be judged)."""
    needs_hardware: bool = False
    """True while a rank's GPUs are a placeholder (not asked, or the node did not answer)."""

    @property
    def needs_addresses(self) -> bool:
        """True while the addresses are a dry run's placeholders."""
        return self.addresses is not None and not self.addresses.resolved

    def with_addresses(self, addresses: GroupAddresses) -> LaunchPlan:
        """The same plan with the addresses the nodes reported."""
        return self._again(addresses=addresses, hardware=self.hardware)

    def with_hardware(self, hardware: dict[str, NodeGpus]) -> LaunchPlan:
        """The same plan with the GPUs the nodes reported (refuses a mismatch unless forced)."""
        return self._again(addresses=self.addresses if self.addresses and self.addresses.resolved else None, hardware=hardware)

    def _again(self, *, addresses: GroupAddresses | None, hardware: dict[str, NodeGpus] | None) -> LaunchPlan:
        return render(self.recipe, self.nodes, self.overrides, profile=self.profile, secrets=self.secrets,
                      allow_unpinned=self.allow_unpinned, addresses=addresses, hardware=hardware, force=self.force)

    def env_file_text(self) -> str:
        return "".join(f"{k}={v}\n" for k, v in self.secrets.items())

    def preflight_commands(self) -> list[str]:
        return ["docker version --format '{{.Server.Version}}'", image_inspect(self.image)]

    def describe(self) -> list[str]:
        """Node by node, every command launch would run; secrets shown by name only."""
        lines = [
            f"recipe {self.recipe.id} → profile {self.profile}; rank 0 ({self.ranks[0].node.name}) serves {self.base_url}",
        ]
        if not re.search(r"(@sha256:[0-9a-f]{64}$)|(^sha256:[0-9a-f]{64}$)", self.image):
            lines.append(f"image {self.image} is not pinned by digest: a real launch needs --allow-unpinned or --set image=…@sha256:…")
        lines += [f"warning: {w}" for w in self.warnings]
        if self.needs_addresses:
            lines.append("addresses in <…> are resolved on the nodes at launch: the head's from `ip -o -4 addr` "
                         "on the head, each worker's from `ip -o -4 route get HEAD` on that worker")
        if self.overrides:
            lines.append("local overrides: " + ", ".join(f"{k}={v}" for k, v in self.overrides.items()) + " (recipe + local overrides: no verified numbers)")
        for rp in self.ranks:
            how = "local, no SSH" if rp.node.local else f"ssh {rp.node.ssh}"
            lines.append(f"node {rp.node.name} (rank {rp.rank}, {how}):")
            for cmd in self.preflight_commands():
                lines.append(f"  $ {cmd}")
            lines.append(f"  $ docker rm -f {rp.container}   # only if a previous one exists")
            if rp.env_file:
                names = ", ".join(f"{n}=<redacted>" for n in rp.secret_names)
                lines.append(f"  write {rp.env_file} (mode 0600, sent on stdin): {names}")
            lines.append("  $ " + shell_join(rp.run_argv))
        return lines


def shell_join(argv: list[str]) -> str:
    """shlex.join, except that a leading `~/` stays the node user's home (`"$HOME"/…`)."""
    return " ".join(shell_path(arg) for arg in argv)


def collect_secrets(recipe: Recipe, environ: dict[str, str] | None = None) -> dict[str, str]:
    """Secret values from c3's own environment: the API key (as VLLM_API_KEY) and HF_TOKEN."""
    # The recipe names its key's variable (`api_key_env`), so that one is read by name; the rest
    # come from the settings.
    env = os.environ if environ is None else environ
    secrets: dict[str, str] = {}
    if recipe.api_key_env and env.get(recipe.api_key_env):
        secrets["VLLM_API_KEY"] = env[recipe.api_key_env]
    token = env.get("HF_TOKEN") if environ is not None else current().secret_env().get("HF_TOKEN")
    if token:
        secrets["HF_TOKEN"] = token
    return secrets


def image_inspect(image: str) -> str:
    """The preflight's image check (`--` first: the image is never read as an option)."""
    return f"docker image inspect --format '{{{{.Id}}}}' -- {shlex.quote(image)}"


def _fill(text: str, values: dict[str, object], where: str) -> str:
    try:
        return template.fill(text, values)
    except ValueError as exc:
        raise UsageError(f"recipe {where}: {exc}", hint="placeholders are {name} or {name:>6}: a recipe parameter or one c3 fills in") from None


def env_file_path(node: Node, profile: str) -> str:
    # `~/` is the node user's $HOME (expanded by the node's shell); the node name is part of the file
    # name in case several nodes share one home (NFS, or test hosts on one machine). Both names are
    # checked (no `/`, no `..`), so the file is always in the run folder.
    name = f"{check_name(profile)}-{node.name}.env"
    if node.local:
        folder = paths.state_home() / "run"
        path = folder / name
        if path.parent != folder or "/" in name:
            raise UsageError(f"env file name `{name}` would leave {folder}")
        return str(path)
    return f"~/.c3/run/{name}"


def container_name(profile: str) -> str:
    """`c3-profile_<profile>`: never a pod's `c3-<pod>` (pod names have no `_`), so on a local node
    launching or stopping a profile cannot remove a pod's container of the same name."""
    return f"c3-profile_{profile}"


def render(
    recipe: Recipe,
    nodes: list[Node],
    overrides: dict[str, ParamValue] | None = None,
    *,
    profile: str | None = None,
    secrets: dict[str, str] | None = None,
    allow_unpinned: bool = False,
    addresses: GroupAddresses | None = None,
    hardware: dict[str, NodeGpus] | None = None,
    force: bool = False,
    dry_run: bool = False,
) -> LaunchPlan:
    """The launch plan; refuses (before any node is touched) a known-abort override, a wrong node
    count, or an image not pinned by digest (unless `allow_unpinned`).

    With several nodes, `{head_address}`, `{node_address}` and `{node_interface}` are what the nodes
    reported (backend.cluster.addresses), or placeholders naming where they will be resolved; every
    rank also gets VLLM_HOST_IP, NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME unless the recipe sets them.

    Each rank that needs GPUs gets its own by device id (`backend.cluster.hardware.pick`, from the
    nodes' `hardware`; a placeholder until they answered); a mismatch refuses unless `force` — in a
    `dry_run` the refusal is a line of the plan and that rank's GPUs a placeholder (as shard's dry run)."""
    overrides = dict(overrides or {})
    # Everything a user can get wrong is refused here, before any node is touched, a profile is
    # stopped or an env file written: the profile name, the override values, the node count, the pin.
    profile = check_name(profile or recipe.id)
    check_values(overrides)
    check_overrides(recipe, overrides)
    if len(nodes) != recipe.nodes:
        raise Refused(
            f"recipe `{recipe.id}` runs on {recipe.nodes} node(s); --nodes names {len(nodes)}",
            hint=f"measured on {recipe.hardware.description}",
        )
    image = str(overrides.get("image", recipe.image))
    pinned = bool(re.search(r"(@sha256:[0-9a-f]{64}$)|(^sha256:[0-9a-f]{64}$)", image))
    if not pinned and not allow_unpinned:
        raise Refused(
            f"image `{image}` is not pinned by digest",
            hint="pin it with --set image=REPO@sha256:… (docker images --digests), or pass --allow-unpinned",
        )
    params: dict[str, ParamValue] = {**recipe.defaults, **{k: v for k, v in overrides.items() if k != "image"}}
    problem = port_problem(params.get("port"))
    if problem:
        raise UsageError(problem, hint="the recipe's `port` is where rank 0 serves the API")
    registry_head = nodes[0].address or nodes[0].ssh_host
    group = (addresses or placeholders(nodes)) if len(nodes) > 1 else None
    secrets = dict(secrets or {})
    secret_env: dict[str, str] = {}
    ranks: list[RankPlan] = []
    warnings: list[str] = []
    gpu_plans = _rank_gpus(recipe, nodes, hardware, force, dry_run)
    for rank, node in enumerate(nodes):
        if group is not None:
            net_env = group.env(node.name)
            where = {"head_address": group.head_address, "node_address": group.ranks[node.name].address,
                     "node_interface": group.ranks[node.name].interface}
        else:
            net_env = {}
            where = {"head_address": registry_head, "node_address": registry_head, "node_interface": ""}
        values: dict[str, object] = {
            **params, "model": recipe.model, "served_model_name": recipe.model_name, "rank": rank,
            "nnodes": len(nodes), **where, "profile": profile,
        }
        template = recipe.command if rank == 0 or recipe.worker_command is None else recipe.worker_command
        args = [_fill(part, values, f"{recipe.id} command") for part in template]
        plain_env: dict[str, str] = {k: v for k, v in net_env.items() if k not in recipe.env}
        filled = {key: _fill(val, values, f"{recipe.id} env {key}") for key, val in recipe.env.items()}
        shown, hidden = split_secrets(filled, recipe.public_env)
        plain_env.update(shown)
        secret_env.update(hidden)
        name = container_name(profile)
        argv = ["docker", "run", "-d", "--name", name,
                "--label", f"{LABEL_PROFILE}={profile}", "--label", f"io.c3.recipe={recipe.id}", "--label", f"io.c3.rank={rank}"]
        d = recipe.docker
        if d.network_host:
            argv += ["--network", "host"]
        if d.ipc_host:
            argv += ["--ipc", "host"]
        picked = gpu_plans[rank]
        if picked is not None:
            warnings += picked.warnings
            if picked.devices is None:
                argv += ["--gpus", f'"device=<{recipe.hardware.gpus_per_node} GPU id(s) picked on {node.name} at launch>"']
            elif picked.devices:
                argv += ["--gpus", gpus_arg(picked.devices)]
        elif d.gpus:
            argv += ["--gpus", d.gpus]
        if d.shm_size:
            argv += ["--shm-size", d.shm_size]
        for vol in d.volumes:
            argv += ["-v", vol]
        argv += list(d.extra_args)
        all_secrets = {**secrets, **secret_env}
        check_env_file(all_secrets, where="the recipe's env")  # before anything is written or started
        env_file = env_file_path(node, profile) if all_secrets else None
        if env_file:
            argv += ["--env-file", env_file]
        for key, val in plain_env.items():
            argv += ["-e", f"{key}={val}"]
        argv += ["--", image, *args]  # `--`: whatever the image says, docker reads it as the image
        ranks.append(RankPlan(rank, node, name, argv, env_file, sorted(all_secrets)))
    scheme = urlparse(nodes[0].host).scheme or "http"
    base_url = host_url(registry_head, limits.port(params["port"]), scheme=scheme, path="/v1")  # [v6] in brackets
    return LaunchPlan(recipe, profile, params, image, overrides, ranks, base_url, {**secrets, **secret_env},
                      addresses=group, nodes=list(nodes), allow_unpinned=allow_unpinned, hardware=hardware, force=force,
                      warnings=warnings, needs_hardware=any(g is not None and g.devices is None for g in gpu_plans))


def picks_gpus(recipe: Recipe) -> bool:
    """True when c3 picks the ranks' GPUs: the recipe needs some and leaves `docker.gpus` at `all`
    (any other value, e.g. `device=1`, is the recipe's own and passed as written; None: no GPUs)."""
    return recipe.hardware.gpus_per_node > 0 and recipe.docker.gpus == "all"


def _rank_gpus(recipe: Recipe, nodes: list[Node], hardware: dict[str, NodeGpus] | None, force: bool, dry_run: bool) -> list[RankGpus | None]:
    """Per rank: the GPUs c3 picked (None where c3 does not pick them)."""
    if recipe.hardware.gpus_per_node == 0 and recipe.docker.gpus == "all":
        return [RankGpus([]) for _ in nodes]  # it needs none: not `--gpus all` either
    if not picks_gpus(recipe):
        return [None for _ in nodes]
    unasked = "not asked yet" if hardware is None else "the node did not answer"
    picked: list[RankGpus | None] = []
    for node in nodes:
        try:
            picked.append(pick(recipe, (hardware or {}).get(node.name) or NodeGpus(node.name, None, unasked, reachable=False), force=force))
        except Refused as refusal:
            if not dry_run:
                raise
            picked.append(RankGpus(None, [f"a real launch refuses: {refusal.message}" + (f" ({refusal.hint})" if refusal.hint else "")]))
    return picked
