"""`c3 serve SLUG [--gpus 0,1] [--port N]`: one model, no estate file (a pod named `serve-<slug>`).

It passes the same rules as `pod create` (TP count, required_sm, one architecture per TP group,
status, the fit-check; `--force` as there) and then the same boot gates as `pod up`.

Which GPUs: asked as club-3090's seed asks when more GPUs are free than the slug needs — each free
GPU alone, or all of them together ("both" on two cards, "all" on more), where "together" means the
model's TP=N variant in the catalog (same engine, same model; c3 says when none exists). `--gpus`
answers the same question in scripts: a count that differs from the slug's TP picks that variant.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from backend.actions.serve_model import catalog_of, free_gpus, variant_for
from backend.errors import Refused, UsageError
from backend.models import CatalogEntry, Gpu
from c3.cli.common import PORT, parse_index_list
from c3.cli.pod_runtime import echo_step, gpu_mode_option, placement_failure, report_outcome

if TYPE_CHECKING:
    from backend.catalog import Catalog


def _no_variant(entry: CatalogEntry, count: int) -> str:
    return f"{entry.slug} needs {entry.gpu_count} GPU(s) and the catalog has no TP={count} variant of {entry.model or entry.slug}"


def _by_count(catalog: Catalog, entry: CatalogEntry, chosen: list[int], *, usage: bool) -> tuple[CatalogEntry, list[int]]:
    variant = variant_for(catalog, entry, len(chosen))
    if variant is None:
        error = UsageError if usage else Refused
        raise error(_no_variant(entry, len(chosen)), hint=f"give {entry.gpu_count} GPU(s), or add a TP={len(chosen)} entry in $C3_HOME/catalog.d/")
    return variant, chosen


def seed_question(free: list[Gpu], *, together: bool = True, need: int = 1) -> tuple[str, str]:
    """club-3090's seed question and its default for these free GPUs. Without a TP variant for all of
    them (`together` false) "both"/"all" is not offered: the question names the slug's own count."""
    if together:
        if len(free) == 2:
            return f"Use GPU {free[0].index}, GPU {free[1].index}, or both?", "both"
        return "Which GPU(s)? (indices such as 0 or 0,2, or all)", "all"
    default = ",".join(str(g.index) for g in free[:need])
    if len(free) == 2 and need == 1:
        return f"Use GPU {free[0].index} or GPU {free[1].index}?", default
    return f"Serve on which {need} GPU(s)? (indices such as {default})", default


ASK_TRIES = 5
"""Answers a terminal user may get wrong before `c3 serve` gives up (a closed stdin ends it at once)."""


def parse_answer(answer: str, free: list[Gpu]) -> list[int]:
    """`both`/`all` → every free GPU; `0` / `GPU 0` / `0,2` → those (each must be free)."""
    text = answer.strip().lower()
    if text in ("both", "all", "together"):
        return [g.index for g in free]
    chosen = parse_index_list(re.sub(r"\bgpu\s*", "", text), what="answer")
    allowed = {g.index for g in free}
    strangers = [i for i in chosen if i not in allowed]
    if strangers:
        raise UsageError(f"GPU {strangers[0]} is not one of the free GPUs ({', '.join(str(i) for i in sorted(allowed))})")
    return chosen


def choose(
    ctx: Any,
    entry: CatalogEntry,
    given: str | None,
    *,
    interactive: bool,
    ask: Callable[[str, str], str] | None = None,
) -> tuple[CatalogEntry, list[int]]:
    """The entry to run (the slug or its TP=N variant) and its host GPU indices (`ctx`: the runtime
    context `ServeModel` opened)."""
    catalog = catalog_of(ctx)
    if given:
        return _by_count(catalog, entry, parse_index_list(given), usage=True)
    need = entry.gpu_count
    free = free_gpus(ctx, ctx.gpus())
    listing = ", ".join(f"{g.index} ({g.name})" for g in free)
    if len(free) < need:
        raise Refused(f"this slug needs {need} GPU(s) but only {len(free)} are free ({', '.join(str(g.index) for g in free) or 'none'})", hint="stop a pod, or pass --gpus and --force")
    if len(free) == need:
        return entry, [g.index for g in free]
    if not interactive:
        raise UsageError(f"several GPUs are free ({listing}); say which {need} with --gpus", hint=f"e.g. --gpus {','.join(str(g.index) for g in free[:need])}")
    together = variant_for(catalog, entry, len(free)) is not None
    question, default = seed_question(free, together=together, need=need)
    if together:
        click.echo(f"free GPUs: {listing}", err=True)
    else:
        click.echo(f"free GPUs: {listing} — together is not offered: {_no_variant(entry, len(free))}", err=True)
    prompt = ask or (lambda text, value: click.prompt(text, default=value, err=True))
    # A wrong answer on a terminal is asked again, as the seed does, rather than ending the command
    # with exit 2; only after ASK_TRIES wrong answers does the last reason become the error.
    for attempt in range(ASK_TRIES):
        reply = prompt(question, default).strip() or default  # Enter takes the default
        try:
            return _by_count(catalog, entry, parse_answer(reply, free), usage=True)
        except UsageError as error:
            if attempt == ASK_TRIES - 1:
                raise
            click.echo(f"{error.message}; answer again", err=True)
    raise AssertionError("unreachable")  # the loop returns or raises


@click.command("serve")
@click.argument("slug")
@click.option("--gpus", "gpus_text", default=None, help="Host GPU indices (asked on a terminal when several are free); a count other than the slug's TP picks its TP=N variant.")
@click.option("--port", type=PORT, default=None, help="Host port (default: the slug's default port).")
@click.option("--name", default=None, help="Pod name (default serve-<slug>).")
@click.option("--force", is_flag=True, help="Pass a wont-fit verdict, slug status and failing gates with a warning (never incompatible hardware).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(1), default=900.0, show_default=True, help="Seconds to wait for the engine to serve.")
@gpu_mode_option
def serve(slug: str, gpus_text: str | None, port: int | None, name: str | None, force: bool, timeout_s: float, gpu_mode: str | None) -> None:
    """Serve one model without pods: pick GPUs, check the fit, boot, wait until it serves, verify placement."""
    from dataclasses import replace

    from backend.actions.serve_model import ServeModel

    asked = ServeModel(slug, port=port, name=name, force=force, timeout_s=timeout_s, gpu_mode=gpu_mode)
    entry, indices = choose(asked.ctx, asked.entry(), gpus_text, interactive=sys.stdin.isatty())
    action = replace(asked, slug=entry.slug, gpus=tuple(indices))
    pod = action.pod()
    warnings, fit = action.check()
    for problem in warnings:
        click.echo(f"warning: {problem.message}", err=True)
    verdict = f" (fit: {fit.verdict})" if fit is not None else ""
    click.echo(f"serving {entry.slug} as pod {pod.name} on GPU {','.join(map(str, indices))}, port {pod.port}{verdict}")
    outcome = action.run(echo_step).data
    report_outcome(outcome, pod.port)
    placement_failure(outcome)
    click.echo(f"stop it with `c3 pod down {pod.name}`")
