"""`c3 serve SLUG [--gpus 0,1] [--port N]`: one model, no estate file (a pod named `serve-<slug>`).

When the GPUs are not given and more free GPUs exist than the slug needs, c3 asks on a terminal
(like club-3090's launcher) and refuses with a clear line when it cannot ask.
"""

from __future__ import annotations

import re
import sys

import click

from backend.errors import Refused, UsageError
from backend.models import Gpu, Pod
from c3.cli.common import parse_index_list
from c3.cli.pod_runtime import echo_progress, gpu_mode_option, placement_failure, report_outcome


def pod_name_for(slug: str) -> str:
    """`vllm/Qwen3-8B` → `serve-qwen3-8b` (a valid pod name)."""
    short = re.sub(r"[^a-z0-9-]+", "-", slug.split("/", 1)[-1].lower()).strip("-") or "model"
    return f"serve-{short}"[:63].rstrip("-")


def free_gpus(ctx, gpus: list[Gpu]) -> list[Gpu]:
    """GPUs no running pod claims and no process holds memory on."""
    claimed = {u for w in ctx.runtime.workloads().values() if w.running for u in w.gpu_uuids}
    busy = {p.gpu_uuid for p in (ctx.processes() or [])}
    return [g for g in gpus if g.uuid not in claimed and g.uuid not in busy]


def choose_gpus(ctx, need: int, given: str | None, *, interactive: bool) -> list[int]:
    if given:
        chosen = parse_index_list(given)
        if len(chosen) != need:
            raise UsageError(f"--gpus lists {len(chosen)} GPU(s) but this slug needs {need} (TP × PP)")
        return chosen
    gpus = ctx.gpus()
    free = free_gpus(ctx, gpus)
    if len(free) < need:
        raise Refused(f"this slug needs {need} GPU(s) but only {len(free)} are free ({', '.join(str(g.index) for g in free) or 'none'})", hint="stop a pod, or pass --gpus and --force")
    if len(free) == need:
        return [g.index for g in free]
    listing = ", ".join(f"{g.index} ({g.name})" for g in free)
    if not interactive:
        raise UsageError(f"several GPUs are free ({listing}); say which {need} with --gpus", hint=f"e.g. --gpus {','.join(str(g.index) for g in free[:need])}")
    default = ",".join(str(g.index) for g in free[:need])
    click.echo(f"free GPUs: {listing}", err=True)
    answer = click.prompt(f"which {need} GPU(s)?", default=default, err=True)
    chosen = parse_index_list(answer)
    if len(chosen) != need:
        raise UsageError(f"{len(chosen)} GPU(s) given but this slug needs {need}")
    return chosen


@click.command("serve")
@click.argument("slug")
@click.option("--gpus", "gpus_text", default=None, help="Host GPU indices (asked on a terminal when several are free).")
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Host port (default: the slug's default port).")
@click.option("--name", default=None, help="Pod name (default serve-<slug>).")
@click.option("--force", is_flag=True, help="Pass failing gates with a warning.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(1), default=900.0, show_default=True, help="Seconds to wait for the engine to serve.")
@gpu_mode_option
def serve(slug: str, gpus_text: str | None, port: int | None, name: str | None, force: bool, timeout_s: float, gpu_mode: str | None) -> None:
    """Serve one model without pods: pick GPUs, boot, wait until it serves, verify placement."""
    from backend.runtime.boot import boot_pod
    from backend.runtime.context import open_context

    ctx = open_context(forced_mode=gpu_mode)
    entry = ctx.entry(slug)
    indices = choose_gpus(ctx, entry.gpu_count, gpus_text, interactive=sys.stdin.isatty())
    pod_name = name or pod_name_for(entry.slug)
    try:
        pod = Pod(name=pod_name, slug=entry.slug, gpus=tuple(indices), port=port or entry.default_port)
    except ValueError:
        raise UsageError(f"`{pod_name}` is not a valid pod name", hint="use [a-z0-9][a-z0-9-]*") from None
    click.echo(f"serving {entry.slug} as pod {pod.name} on GPU {','.join(map(str, indices))}, port {pod.port}")
    outcome = boot_pod(ctx, pod, estate="", force=force, timeout_s=timeout_s, progress=echo_progress)
    report_outcome(outcome, pod.port)
    placement_failure(outcome)
    click.echo(f"stop it with `c3 pod down {pod.name}`")
