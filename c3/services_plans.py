"""The exact plans the confirm gate shows, and the recipes adapter (used by `services_real`)."""

from __future__ import annotations

from typing import Any

from backend.errors import C3Error
from c3.services import NewPod, RecipeRow, WriteKind


def _gpu_list(gpus: Any) -> str:
    return ",".join(str(i) for i in gpus)


def plan_lines(svc: Any, kind: WriteKind, pod: str | None, request: NewPod | None, running: tuple[str, ...]) -> list[str]:
    """Line by line what the write will do, with the real names, GPUs (and UUIDs), ports and files."""
    if kind == "create" and request is not None:
        lines = [
            f"append to {svc.path}:",
            f"  - name: {request.name}",
            f"    slug: {request.slug}",
            f"    gpus: [{', '.join(map(str, request.gpus))}]",
            f"    port: {request.port}",
        ]
        try:
            report = svc.fit(request.slug, request.gpus)
            lines.append(f"fit on GPU {_gpu_list(request.gpus)}: {report.verdict}" + (f" ({report.reasons[0]})" if report.reasons else ""))
        except C3Error as error:
            lines.append(f"fit: {error.message}")
        lines.append("nothing starts until you boot it (u)")
        return lines
    if kind == "stop_all":
        if not running:
            return ["nothing in the estate is running"]
        pods = {p.name: p for p in svc._estate_pods()}
        return [f"stop and remove the workload of pod {name} (GPU {_gpu_list(pods[name].gpus)}, port {pods[name].port})" for name in running if name in pods] + [
            "the estate file is not changed; u boots a pod again"
        ]
    try:
        target = svc._pod(pod or "")
    except C3Error as error:
        return [error.message]
    if kind == "up":
        return _up_lines(svc, target)
    if kind == "down":
        return [f"stop and remove the workload of pod {target.name} ({svc.ctx.runtime.kind}; GPU {_gpu_list(target.gpus)}, port {target.port})", "the pod stays in the estate file"]
    return [f"remove pod {target.name} ({target.slug}, GPU {_gpu_list(target.gpus)}, port {target.port}) from {svc.path}", "refused while it runs"]


def _up_lines(svc: Any, pod: Any) -> list[str]:
    from backend.runtime.boot import launch_spec

    try:
        entry = svc.catalog_obj().get(pod.slug)
        by_index = {g.index: g for g in svc._gpus()}
        gpus = [by_index[i] for i in pod.gpus if i in by_index]
        decision = svc.ctx.runtime.gpu_mode(svc.ctx.forced_mode)
        spec = launch_spec(pod, entry, gpus, mode=decision.mode, estate=str(svc.path))
    except C3Error as error:
        return [f"boot pod {pod.name}: {error.message}"]
    where = "container c3-" + pod.name if svc.ctx.runtime.kind == "docker" else f"local stub process for {pod.name}"
    return [
        f"gates: GPUs {_gpu_list(pod.gpus)} not held by another pod or process, port {pod.port} free, enough free VRAM",
        f"start {where} from {spec.image}",
        f"pin GPU {', '.join(f'{g.index} ({g.uuid})' for g in gpus)} — gpu mode {decision.mode} ({decision.why})",
        f"publish port {pod.port} → {spec.container_port}; wait for {spec.health_path}, then verify placement",
        "argv: " + " ".join(spec.argv)[:300],
    ]


def recipes_rows() -> list[RecipeRow] | None:
    """The recipe catalogue (built-ins + `$C3_HOME/recipes.d/`) as rows; None without a recipes backend."""
    try:
        from backend.recipes import load_recipes
    except ImportError:  # a build without NODES' recipes package
        return None
    rows = []
    for recipe in load_recipes().values():
        measured = getattr(recipe, "measured", None)
        numbers: list[str] = []
        if measured is not None:
            labels = (("tokens_per_s", "decode {} tok/s (1 stream)"), ("aggregate_tokens_per_s", "aggregate {} tok/s"), ("concurrency", "at concurrency {}"),
                      ("ttft_ms", "TTFT {} ms"), ("startup_s", "start-up {} s"))
            numbers = [text.format(getattr(measured, key)) for key, text in labels if getattr(measured, key, None) is not None]
        prov = recipe.provenance
        provenance = ""
        if prov is not None:
            provenance = f"{prov.measured_by}" + (f", {prov.measured_on}" if prov.measured_on else "") + f" on {prov.hardware}" + (f" — {prov.source}" if prov.source else "")
        rows.append(
            RecipeRow(
                id=recipe.id,
                hardware=recipe.hardware.description,
                nodes=recipe.nodes,
                image=recipe.image,
                verified=bool(getattr(recipe, "verified", False)),
                summary=recipe.title or f"{recipe.model} ({recipe.engine})",
                provenance=provenance,
                measured=tuple(numbers),
            )
        )
    return rows
