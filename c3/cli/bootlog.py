"""`c3 bootlog FILE|-`: read an engine's boot log back (vLLM V1/V0, SGLang, llama.cpp lines) and report
what the engine measured — weights, available KV memory, KV tokens, concurrency — the ground truth a
fit-check prediction is compared with."""

from __future__ import annotations

from pathlib import Path

import click

from backend.errors import Refused
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
@json_option
def bootlog(path: str, as_json: bool) -> None:
    """Read an engine's boot log (a file, or - for stdin, e.g. `docker logs c3-chat 2>&1 | c3 bootlog -`).

    Exit 0 when at least one memory line was found; 1 when the log has none.
    """
    from backend.views.fit import read_boot_log

    report = read_boot_log(None if path == "-" else Path(path))
    found = {key: getattr(report, key) for key, _, _ in FIELDS if getattr(report, key) not in (None, [], {})}
    if as_json:
        emit_json(report.model_dump(mode="json"))
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
    if not any(k in found for k in ("weights_gib", "available_kv_gib", "kv_cache_tokens", "max_concurrency", "gpu_blocks")) and not report.llamacpp_mib:
        raise Refused("no engine memory lines in this log", hint="pass the engine's full start-up output (vLLM prints them before serving)")
