"""`c3 bootlog FILE|-`: read an engine's boot log back (vLLM V1/V0, SGLang, llama.cpp lines) and report
what the engine measured — weights, available KV memory, KV tokens, concurrency — the ground truth a
fit-check prediction is compared with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from backend.errors import Refused, UsageError
from c3.cli.common import emit_json, json_option

FIELDS = [
    ("engine", "engine", ""),
    ("engine_version", "version", ""),
    ("weights_gib", "weights per rank", " GiB"),
    ("available_kv_gib", "available KV (min over ranks)", " GiB"),
    ("kv_cache_tokens", "KV cache tokens", ""),
    ("kv_device", "KV pool on", ""),
    ("max_concurrency", "max concurrency", "×"),
    ("max_model_len", "at max_model_len", ""),
    ("gpu_memory_utilization", "gpu_memory_utilization", ""),
    ("cudagraph_estimate_gib", "CUDA graphs (estimated)", " GiB"),
    ("cudagraph_actual_gib", "CUDA graphs (actual)", " GiB"),
    ("gpu_blocks", "GPU blocks", ""),
]


@click.command()
@click.argument("path", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--learn", "learn", metavar="SLUG", help="Record the log as a boot of SLUG (with --gpus or --card) for later `c3 fit SLUG`.")
@click.option("--gpus", help="--learn: the host GPU indices it booted on, e.g. 0,1.")
@click.option("--card", "cards", help="--learn: the card profile ids it booted on, e.g. rtx-3090.")
@json_option
def bootlog(path: str, as_json: bool, learn: str | None, gpus: str | None, cards: str | None) -> None:
    """Read an engine's boot log (a file, or - for stdin, e.g. `docker logs c3-chat 2>&1 | c3 bootlog -`).

    With --learn SLUG, also record what it measured as a boot of SLUG on those GPUs or cards: a later
    `c3 fit SLUG` on the same cards prices with it ("learned from N boots on DATE").

    Exit 0 when at least one memory line was found; 1 when the log has none.
    """
    from backend.views.fit import read_boot_log_and_text

    if (gpus or cards) and not learn:
        raise UsageError("--gpus and --card go with --learn SLUG")
    report, text = read_boot_log_and_text(None if path == "-" else Path(path))
    found = {key: getattr(report, key) for key, _, _ in FIELDS if getattr(report, key) not in (None, [], {})}
    recorded = _learn(text, learn, gpus, cards) if learn else None
    if as_json:
        emit_json(report.model_dump(mode="json") | ({"recorded": recorded} if recorded is not None else {}))
    else:
        for key, label, unit in FIELDS:
            if key in found:
                value = found[key]
                shown = f"{value:,}" if isinstance(value, int) else str(value)
                click.echo(f"{label:<30} {shown}{unit}")
        for device, slots in report.llamacpp_mib.items():
            sizes = ", ".join(f"{slot} {mib:,.2f}" for slot, mib in slots.items())
            click.echo(f"{'llama.cpp ' + device + ' buffers':<30} {sizes} MiB")
        if len(report.available_kv_gib_per_rank) > 1:
            per_rank = ", ".join(f"{v:.2f}" for v in report.available_kv_gib_per_rank)
            click.echo(f"{'available KV per rank':<30} {per_rank} GiB")
        if recorded is not None:
            click.echo(f"recorded for `c3 fit {recorded['slug']}` on {', '.join(recorded['cards'])}: {recorded['boots']} boot(s) of this setup on record")
    if not any(k in found for k in ("weights_gib", "available_kv_gib", "kv_cache_tokens", "max_concurrency", "gpu_blocks")) and not report.llamacpp_mib:
        raise Refused("no engine memory lines in this log", hint="pass the engine's full start-up output (vLLM prints them before serving)")


def _learn(text: str, slug: str, gpus: str | None, cards: str | None) -> dict[str, Any]:
    """Record the log under SLUG's setup; what `--json` adds as `recorded` (and the text line says)."""
    from backend.views.fit import learn_boot_log
    from c3.cli.common import parse_index_list

    found = [c.strip().lower() for c in cards.split(",") if c.strip()] if cards else None
    rec, boots, warning = learn_boot_log(text, slug, gpus=parse_index_list(gpus) if gpus else None, cards=found)
    if warning:
        click.echo(f"warning: {warning}", err=True)
    return {"slug": rec.slug, "cards": rec.cards, "key": rec.key, "boots": boots, "measured": rec.measured.model_dump(mode="json", exclude_none=True)}
