"""`c3 cache ls`: which model weights a node holds on disk, how big, and what a catalog slug whose model
is not there would download (backend.views.cache)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from c3.cli.common import emit_json, exit_if_unreachable, json_option, node_trouble
from c3.cli.terminal import error_line

if TYPE_CHECKING:
    from backend.views.cache import NodeCache

GIB = 1024**3


@click.group("cache")
def cache() -> None:
    """Model weights on disk: what each node has cached, how big, and what a slug would download."""


def _gib(size: int | None) -> str:
    return "?" if size is None else f"{size / GIB:.2f} GiB"


@cache.command("ls")
@click.option("--node", "names", default=None, metavar="NAME[,NAME]",
              help="Registered node(s) to read over their SSH target (default: this machine, read directly).")
@click.option("--path", "paths", multiple=True, metavar="DIR",
              help="Another folder of models to look in, on each node (repeatable).")
@click.option("--all", "show_all", is_flag=True, help="List every catalog slug not cached (default: the first 10 by size).")
@json_option
def ls(names: str | None, paths: tuple[str, ...], show_all: bool, as_json: bool) -> None:
    """List cached model weights: the Hugging Face hub cache ($HF_HUB_CACHE, else $HF_HOME/hub, else
    ~/.cache/huggingface/hub), the folders recipes mount, and --path. A snapshot's links into blobs count
    once. Then what each catalog slug not cached would download (sizes from the catalog's weights.csv).
    Exit 3 when a named node cannot be reached."""
    from backend.views.cache import cache_listing

    rows = cache_listing(names, paths)
    unreachable = [r.node or "this machine" for r in rows if not r.reachable]
    failed = [r for r in rows if r.reachable and r.error]
    if as_json:
        emit_json({"nodes": [r.model_dump(mode="json") for r in rows]})
    else:
        for row in rows:
            _print_node(row, show_all)
    exit_if_unreachable(unreachable, len(rows))
    if failed:
        error_line(f"node `{failed[0].node}`: {failed[0].error}")
        sys.exit(1)


def _print_node(row: NodeCache, show_all: bool) -> None:
    who = row.node or "this machine"
    if node_trouble(who, row.reachable, row.error):
        return
    cut = f"; cut at the {row.cut} bound, sizes are lower bounds" if row.cut else ""
    click.echo(f"{who}: {len(row.models)} model(s), {_gib(row.total_bytes)} (read in {row.elapsed_s:.2f} s{cut})")
    if row.models:
        width = min(max(len(m.name) for m in row.models), 48)
        click.echo(f"  {'MODEL':<{width}}  {'SIZE':>11}  {'KIND':<6}  SLUGS")
        for m in row.models:
            notes = [", ".join(m.slugs) or "-"]
            if m.incomplete_bytes:
                notes.append(f"({_gib(m.incomplete_bytes)} unfinished)")
            if m.partial:
                notes.append("(partial)")
            click.echo(f"  {m.name:<{width}}  {_gib(m.bytes):>11}  {m.kind:<6}  {' '.join(notes)}")
    places = [r.path + ("" if r.exists else " (absent)") + (f" ({r.error})" if r.error else "") for r in row.roots]
    click.echo(f"  looked in: {', '.join(places)}")
    if not row.not_cached:
        return
    wanted = sorted(row.not_cached, key=lambda d: -(d.bytes or 0))
    shown = wanted if show_all else wanted[:10]
    click.echo(f"  not cached ({len(wanted)} slug(s)); a launch would download (sizes: the catalog's weights.csv):")
    width = max(len(d.slug) for d in shown)
    for d in shown:
        click.echo(f"    {d.slug:<{width}}  {_gib(d.bytes):>11}  {d.model}")
    if len(shown) < len(wanted):
        click.echo(f"    … {len(wanted) - len(shown)} more (--all lists them, --json says where each size comes from)")
