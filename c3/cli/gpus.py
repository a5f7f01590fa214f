"""`c3 gpus [--json]`: every GPU of this machine (NVML) or of the simulated rig (`C3_RIG`)."""

from __future__ import annotations

from typing import Any

import click

from backend.cards import match_card
from backend.gpu import get_probe
from backend.models.gpu import Gpu, GpuSnapshot
from c3.cli.common import emit_json, json_option


def card_id(gpu: Gpu) -> str | None:
    """The card profile the fit-check will use for this GPU (None: unprofiled)."""
    profile = match_card(gpu)
    return profile.id if profile is not None else None


def gpu_row(snap: GpuSnapshot) -> dict[str, Any]:
    """One GPU as `c3 gpus --json` prints it (the contract's keys first, then extras)."""
    gpu = snap.gpu
    return {
        "index": gpu.index,
        "uuid": gpu.uuid,
        "name": gpu.name,
        "total_mib": gpu.total_mib,
        "used_mib": snap.used_mib,
        "sm": gpu.sm,
        "free_mib": snap.free_mib,
        "reserved_mib": gpu.reserved_mib,
        "cuda_total_mib": gpu.cuda_total_mib,
        "ecc": gpu.ecc,
        "card": card_id(gpu),
        "util_pct": snap.util_pct,
        "temp_c": snap.temp_c,
        "power_w": snap.power_w,
        "power_limit_w": snap.power_limit_w,
        "processes": [{"pid": p.pid, "used_mib": p.used_mib} for p in snap.processes],
    }


def _or(value: Any, unit: str = "", missing: str = "–") -> str:
    if value is None:
        return missing
    return f"{value:g}{unit}" if isinstance(value, float) else f"{value}{unit}"


def _table(rows: list[dict[str, Any]], source: str) -> str:
    headers = ("GPU", "NAME", "MEMORY USED/TOTAL", "CUDA SEES", "SM", "UTIL", "TEMP", "POWER", "CARD", "PROCS")
    lines: list[tuple[str, ...]] = []
    for r in rows:
        name = r["name"].replace("NVIDIA ", "").replace("GeForce ", "")
        if r["total_mib"] is None:
            memory = f"{_or(r['used_mib'])} / n/a (unified)"
        else:
            memory = f"{_or(r['used_mib'])} / {r['total_mib']} MiB"
        cuda = "–" if r["cuda_total_mib"] is None else f"{r['cuda_total_mib'] / 1024:.2f} GiB"
        power = f"{_or(r['power_w'], ' W')} / {_or(r['power_limit_w'], ' W')}" if r["power_w"] is not None or r["power_limit_w"] is not None else "–"
        lines.append(
            (
                str(r["index"]),
                name,
                memory,
                cuda,
                _or(r["sm"]),
                _or(r["util_pct"], "%"),
                _or(r["temp_c"], "°C"),
                power,
                _or(r["card"], missing="(unprofiled)"),
                str(len(r["processes"])),
            )
        )
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    out += ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    if not lines:
        out.append("(no GPUs)")
    out.append(f"source: {source}")
    return "\n".join(out)


def _process_table(rows: list[dict[str, Any]], source: str) -> str:
    headers = ("GPU", "PID", "MIB", "POD", "USER", "COMMAND")
    lines = []
    for r in rows:
        if r["foreign"]:
            pod = "(foreign: no c3 pod)"
        elif r["misplaced"]:
            pod = f"{r['pod']} (MISPLACED: plans GPU {','.join(map(str, r['planned_gpus'] or []))})"
        else:
            pod = r["pod"]
        lines.append((str(r["gpu_index"]), str(r["pid"]), _or(r["used_mib"], missing="?"), pod, _or(r["user"], missing="?"),
                      r["command"] if r["command"] is not None else "(gone, or not visible from this host)"))
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    out += ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    if not lines:
        out.append("(no compute process on any GPU)")
    out.append(f"source: {source}")
    return "\n".join(out)


def process_rows_now() -> tuple[list[dict[str, Any]], str]:
    """Every compute process on this machine's GPUs, mapped to the estate's pods by the runtime."""
    from backend.estate import load_estate
    from backend.paths import estate_file
    from backend.runtime.context import open_context
    from backend.runtime.gpu_processes import process_rows

    probe = get_probe()
    snapshots = probe.snapshots()
    path = estate_file()
    pods = load_estate(path).pods if path.exists() else []
    if not any(s.processes for s in snapshots):
        return [], probe.source  # nothing to attribute: the runtime (Docker) is not asked
    ctx = open_context()
    return [r.row() for r in process_rows(snapshots, pods, ctx.runtime.owners)], probe.source


@click.command("gpus")
@json_option
@click.option("--processes", "processes", is_flag=True, help="List the compute processes on the GPUs: pid, memory, pod (or foreign), user, command.")
def gpus(as_json: bool, processes: bool) -> None:
    """List this machine's GPUs: memory, compute capability, load, and the card profile they map to."""
    if processes:
        rows, source = process_rows_now()
        if as_json:
            emit_json({"processes": rows, "source": source})
        else:
            click.echo(_process_table(rows, source))
        return
    probe = get_probe()
    rows = [gpu_row(s) for s in probe.snapshots()]
    if as_json:
        emit_json({"gpus": rows, "source": probe.source})
    else:
        click.echo(_table(rows, probe.source))
