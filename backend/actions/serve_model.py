"""Serve one model without an estate file (`c3 serve SLUG`): a pod named `serve-<slug>` that passes
the same rules as `pod create` (TP count, required_sm, one architecture per TP group, status, the
fit-check) and then the same boot gates as `pod up`.

Which GPUs it takes is the front end's question (asked as club-3090's seed asks); the rules that
answer it — which GPUs are free, which catalog entry runs the model on N GPUs — live here.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from backend.actions.base import Action, Outcome, Plan, Problem, Progress, ProgressSink
from backend.actions.registry import register
from backend.errors import C3Error, UsageError

if TYPE_CHECKING:
    from backend.models import CatalogEntry, Gpu, Pod
    from backend.runtime.context import RuntimeContext


def pod_name_for(slug: str) -> str:
    """`vllm/Qwen3-8B` → `serve-qwen3-8b` (a valid pod name)."""
    short = re.sub(r"[^a-z0-9-]+", "-", slug.split("/", 1)[-1].lower()).strip("-") or "model"
    return f"serve-{short}"[:63].rstrip("-")


def free_gpus(ctx: Any, gpus: list[Gpu]) -> list[Gpu]:
    """GPUs no running pod claims and no process holds memory on."""
    claimed = {u for w in ctx.runtime.workloads().values() if w.running for u in w.gpu_uuids}
    busy = {p.gpu_uuid for p in (ctx.processes() or [])}
    return [g for g in gpus if g.uuid not in claimed and g.uuid not in busy]


def catalog_of(ctx: Any) -> Any:
    """The context's catalog, loaded on first use."""
    from backend.catalog import load_catalog

    return ctx.catalog if ctx.catalog is not None else load_catalog()


def variant_for(catalog: Any, entry: CatalogEntry, count: int) -> CatalogEntry | None:
    """The catalog entry that runs `entry`'s model on `count` GPUs (TP × PP), itself included."""
    if entry.gpu_count == count:
        return entry
    same = [e for e in catalog.entries if e.engine == entry.engine and e.model == entry.model and e.gpu_count == count]
    same.sort(key=lambda e: (e.pp != 1, e.status != "production", e.slug))
    return same[0] if same else None


@register
@dataclass
class ServeModel(Action):
    key = "serve"
    doing = "serve {target}"
    progress_panel = "boot"
    slug: str
    gpus: tuple[int, ...] = ()
    """Host GPU indices (the front end chose them: `--gpus`, or the seed question)."""
    port: int | None = None
    """Host port (None: the slug's default port)."""
    name: str | None = None
    """Pod name (None: `serve-<slug>`)."""
    force: bool = False
    """Pass a wont-fit verdict, slug status and failing gates with a warning (never incompatible hardware)."""
    timeout_s: float = 900.0
    gpu_mode: str | None = None
    """`--gpu-mode` for the runtime context opened here."""
    context: RuntimeContext | None = field(default=None, repr=False)

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> ServeModel:
        return cls(target or "", **(request or {}))

    @property
    def ctx(self) -> RuntimeContext:
        """The runtime context (GPU probe, runtime, catalog), opened on first use and kept."""
        if self.context is None:
            from backend.wiring import open_context

            self.context = open_context(forced_mode=self.gpu_mode)
        return self.context

    @property
    def target(self) -> str | None:
        return self.slug

    def entry(self) -> CatalogEntry:
        return self.ctx.entry(self.slug)

    def pod(self) -> Pod:
        """The lone pod; UsageError for a name that is not a pod name."""
        from backend.models import Pod

        entry = self.entry()
        pod_name = self.name or pod_name_for(entry.slug)
        try:
            return Pod(name=pod_name, slug=entry.slug, gpus=self.gpus, port=self.port or entry.default_port)
        except ValueError:
            raise UsageError(f"`{pod_name}` is not a valid pod name", hint="use [a-z0-9][a-z0-9-]*") from None

    def check(self) -> tuple[list[Any], Any]:
        """`pod create`'s rules for the lone pod: (warnings that pass, the fit report or None).
        Raises Refused on a rule that refuses (incompatible hardware; the rest unless `force`)."""
        from backend.estate.ops import check_lone_pod

        ctx = self.ctx
        rig = ctx.gpus() if ctx.probe is not None else None
        return check_lone_pod(self.pod(), rig, ctx.catalog, force=self.force)

    def plan(self) -> Plan:
        title = f"Serve {self.slug}"
        try:
            pod = self.pod()
            _warnings, fit = self.check()
        except C3Error as error:
            return Plan(title, (f"serve {self.slug}: {error.message}",))
        verdict = f" (fit: {fit.verdict})" if fit is not None else ""
        return Plan(title, (f"serve {pod.slug} as pod {pod.name} on GPU {','.join(map(str, pod.gpus))}, port {pod.port}{verdict}",
                            "then boot it as `c3 pod up` does: gates, launch pinned, wait until it serves, verify placement"))

    def problems(self) -> list[Problem]:
        try:
            warnings, _fit = self.check()
        except C3Error as error:
            return [Problem(error.message, hint=error.hint)]
        return [Problem(w.message, "warning", getattr(w, "hint", None)) for w in warnings]

    def run(self, progress: ProgressSink) -> Outcome:
        """Boot it (after `check`, which the front end runs first to show its warnings); `data` is the
        boot's `BootOutcome`."""
        from backend.runtime.boot import boot_pod

        pod = self.pod()
        started = time.monotonic()

        def say(name: str, line: str) -> None:
            progress(Progress(name, line.split(" … ")[0], time.monotonic() - started, line=line))

        outcome = boot_pod(self.ctx, pod, estate="", force=self.force, timeout_s=self.timeout_s, progress=say)
        message = f"pod {pod.name} is serving on http://127.0.0.1:{pod.port}/v1" if outcome.ok else f"pod {pod.name} failed to boot: {outcome.detail}"
        return Outcome(outcome.ok, message, f"stop it with `c3 pod down {pod.name}`", data=outcome)
