"""`c3 catalog`: the slugs c3 knows (built-in plus `$C3_HOME/catalog.d/`), optionally priced on GPUs."""

from __future__ import annotations

from typing import Any

import click

from c3.cli.common import emit_json, json_option, parse_index_list

HELP = """List the catalog: built-in slugs merged with $C3_HOME/catalog.d/*.yaml (same slug replaces).

\b
--fits-on 0,1 prices every slug that needs at most that many GPUs on the first of them (in the
order given) and adds its verdict and available KV memory. Exit 0; 2 for a malformed catalog.d file;
3 when --fits-on has no GPU probe.
"""


@click.command("catalog", help=HELP)
@click.option("--fits-on", "fits_on", help="Host GPU indices to price every slug on, e.g. 0,1.")
@json_option
def catalog(fits_on: str | None, as_json: bool) -> None:
    from backend.views.fit import catalog_rows

    found = catalog_rows(parse_index_list(fits_on, what="--fits-on") if fits_on else None)
    rows: list[dict[str, Any]] = [r.model_dump(mode="json", exclude_unset=True) for r in found]
    if as_json:
        emit_json({"entries": rows})
        return
    width = max((len(r["slug"]) for r in rows), default=10) + 2
    head = f"{'SLUG':<{width}}{'TP×PP':<7}{'PORT':<7}{'STATUS':<14}"
    head += f"{'VERDICT':<17}{'KV GiB':>8}" if fits_on else "MODEL"
    click.echo(head)
    for r in rows:
        line = f"{r['slug']:<{width}}{str(r['tp']) + '×' + str(r['pp']):<7}{r['default_port']:<7}{r['status'] + ('*' if r['user'] else ''):<14}"
        if fits_on:
            kv = r.get("available_kv_gib")
            line += f"{r.get('verdict', ''):<17}{'' if kv is None else f'{kv:.2f}':>8}"
        else:
            line += r["model"]
        click.echo(line)
    if any(r["user"] for r in rows):
        click.echo("* from $C3_HOME/catalog.d")
