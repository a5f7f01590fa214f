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
    from backend.catalog import load_catalog

    cat = load_catalog()
    verdicts: dict[str, dict[str, Any]] = {}
    if fits_on:
        from backend.fit import fit_on_gpus
        from c3.cli.fit import probe_gpus

        gpus = probe_gpus(parse_index_list(fits_on, what="--fits-on"))
        for entry in cat.entries:
            if entry.gpu_count > len(gpus):
                continue
            report = fit_on_gpus(entry, gpus[: entry.gpu_count], catalog=cat)
            verdicts[entry.slug] = {"verdict": report.verdict, "available_kv_gib": report.available_kv_gib, "max_concurrency": report.max_concurrency}
    rows: list[dict[str, Any]] = []
    for entry in cat.entries:
        if fits_on and entry.slug not in verdicts:
            continue
        row = {"slug": entry.slug, "engine": entry.engine, "model": entry.model, "tp": entry.tp, "pp": entry.pp,
               "default_port": entry.default_port, "status": entry.status, "image": entry.image, "user": entry.user}
        row.update(verdicts.get(entry.slug, {}))
        rows.append(row)
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
