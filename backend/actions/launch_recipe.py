"""Launch a recipe on nodes and make its profile the active one (`c3 recipes launch`, the Recipes
mode's `L`). Secrets never reach a plan: `describe()` names them only; they are read into the
rendered commands again inside `run`."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, Progress, ProgressSink
from backend.actions.inputs import RecipeLaunch
from backend.actions.registry import register
from backend.errors import C3Error


@register
@dataclass
class LaunchRecipe(Action):
    key = "recipe_launch"
    doing = "launch a recipe"
    progress_panel = "launch"
    request: RecipeLaunch
    wait: bool = True
    """Wait for rank 0 to answer (`--no-wait` returns once the containers started)."""
    timeout_s: float | None = None
    """Seconds to wait for rank 0 (default: the recipe's start-up grace)."""

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> LaunchRecipe:
        return cls(request)

    @property
    def target(self) -> str | None:
        return self.request.recipe

    def render(self, *, with_secrets: bool, preview: bool = False, dry_run: bool = False) -> Any:
        """The launch plan, node by node. `preview` renders what a refused launch would run (an
        unpinned image, an override known to abort): the refusal itself is among the problems.
        `dry_run`: GPUs that do not meet the recipe are a line of the plan, not a refusal."""
        from backend.cluster.plan import collect_secrets, render
        from backend.nodes.registry import resolve_nodes
        from backend.recipes import get_recipe, parse_overrides

        r = self.request
        recipe = get_recipe(r.recipe)
        if preview:
            recipe = recipe.model_copy(update={"known_aborts": []})
        overrides = parse_overrides(recipe, list(r.overrides))
        nodes = resolve_nodes(list(r.nodes))
        secrets = collect_secrets(recipe) if with_secrets else {}
        hardware = self._hardware(recipe, nodes, r.profile or recipe.id) if len(nodes) == recipe.nodes else None
        return render(recipe, nodes, overrides, profile=r.profile, secrets=secrets, allow_unpinned=r.allow_unpinned or preview,
                      hardware=hardware, force=r.force, dry_run=dry_run)

    @staticmethod
    def _hardware(recipe: Any, nodes: list[Any], profile: str) -> Any:
        """The nodes' GPUs and who holds them (read-only: nvidia-smi, docker inspect), when c3 picks the
        ranks' GPUs; a node that does not answer is a placeholder in the plan (and refused at launch)."""
        from backend.cluster import hardware
        from backend.cluster.launch import free_profiles
        from backend.cluster.plan import picks_gpus
        from backend.cluster.standdown import active_to_stand_down
        from backend.nodes.health import QUICK
        from backend.profiles import check_name
        from backend.remote.fleet import Fleet, run_sync
        from backend.wiring import local_rig_gpus

        if not picks_gpus(recipe):
            return None
        keep = free_profiles(check_name(profile), active_to_stand_down(profile))

        async def ask() -> dict[str, hardware.NodeGpus]:
            async with Fleet(nodes, QUICK) as fleet:
                return await hardware.probe(nodes, fleet, keep, timeout=QUICK.command_timeout, local_gpus=local_rig_gpus())

        return run_sync(ask())

    def dry_run(self, rendered: Any) -> list[str]:
        """The commands, node by node (secrets by name), after the active profile it stands down."""
        from backend.cluster.standdown import active_to_stand_down

        current = active_to_stand_down(rendered.profile)
        first = [f"first: stop the active profile {current} (one profile is active at a time)"] if current else []
        return first + list(rendered.describe())

    def plan(self) -> Plan:
        r = self.request
        title = f"Launch recipe {r.recipe}"
        try:
            rendered = self.render(with_secrets=True, dry_run=True)
        except C3Error:
            try:
                rendered = replace(self, request=replace(r, allow_unpinned=True)).render(with_secrets=True, preview=True, dry_run=True)
            except C3Error as error:
                return Plan(title, (f"launch {r.recipe} on {', '.join(r.nodes) or 'no nodes'}: {error.message}",), wide=True)
        lines = self.dry_run(rendered)
        lines.append(f"then wait up to {rendered.recipe.startup_grace_s} s for rank 0; write profile {rendered.profile} and make it active")
        return Plan(title, tuple(lines), wide=True)

    def problems(self) -> list[Problem]:
        try:
            self.render(with_secrets=False)
        except C3Error as error:
            return [Problem(error.message, hint=error.hint)]
        return []

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.cluster.launch import launch
        from backend.remote.fleet import run_sync
        from backend.wiring import local_rig_gpus

        rendered = self.render(with_secrets=True)
        started = time.monotonic()
        steps: list[str] = []

        def step(text: str, *, line: bool) -> None:
            steps.append(text)
            progress(Progress(rendered.profile, text, time.monotonic() - started, tuple(steps[-4:]), line=text if line else None))

        step(f"launching {self.request.recipe} on {', '.join(self.request.nodes)}", line=False)
        try:
            profile = run_sync(launch(rendered, wait=self.wait, wait_timeout_s=self.timeout_s, say=lambda text: step(text, line=True),
                                      local_gpus=local_rig_gpus()))
        except C3Error:
            progress(Progress(rendered.profile, "failed", time.monotonic() - started, tuple(steps[-4:]), done=True, ok=False))
            raise
        progress(Progress(rendered.profile, "serving", time.monotonic() - started, tuple(steps[-4:]), done=True, ok=True))
        return Outcome(True, f"profile {profile.name} is active: {profile.base_url} (model {profile.model})",
                       "point clients at it: eval \"$(c3 profile env)\"", data=profile)
