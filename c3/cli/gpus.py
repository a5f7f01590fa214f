"""`c3 gpus [--json]`: every GPU of this machine (NVML) or of the simulated rig (`C3_RIG`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from backend.views.gpus import gpu_list, gpu_process_list
from c3.cli.common import echo_line, emit_json, file_option, json_option


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


@click.group("gpus", invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@json_option
@click.option("--processes", "processes", is_flag=True, help="List the compute processes on the GPUs: pid, memory, pod (or foreign), user, command.")
@click.pass_context
def gpus(ctx: click.Context, as_json: bool, processes: bool) -> None:
    """List this machine's GPUs: memory, compute capability, load, and the card profile they map to."""
    if ctx.invoked_subcommand is not None:
        return  # `c3 gpus kill PID`: the subcommand does the work
    from backend.views.estate_file import estate_path

    listing = gpu_process_list(estate_path()) if processes else gpu_list()
    if as_json:
        emit_json(listing.model_dump(mode="json"))
    elif processes:
        click.echo(_process_table(listing.model_dump(mode="json")["processes"], listing.source))
    else:
        click.echo(_table(listing.model_dump(mode="json")["gpus"], listing.source))


@gpus.command("kill")
@click.argument("pid", type=click.IntRange(min=1))
@click.option("--signal", "signal_name", type=click.Choice(["TERM", "KILL", "INT", "HUP"], case_sensitive=False), default="TERM", show_default=True,
              help="The signal to send.")
@click.option("--foreign", is_flag=True, help="Signal it although it is no c3 pod's process (someone else's job).")
@click.option("--dry-run", is_flag=True, help="Show what would be signalled; send nothing.")
@json_option
@file_option
def kill(pid: int, signal_name: str, foreign: bool, dry_run: bool, as_json: bool, file: Path | None) -> None:
    """Signal the GPU process PID (a pid `c3 gpus --processes` lists); a foreign one only with --foreign."""
    from backend.actions import refuse_on
    from backend.actions.inputs import ProcessSignal
    from backend.actions.signal_process import SignalProcess
    from backend.actions.workspace import Workspace
    from backend.views.estate_file import estate_path

    action = SignalProcess(Workspace(estate_path(file)), ProcessSignal(pid, signal_name.upper(), foreign))
    plan = action.plan()
    problems = action.problems()
    if dry_run:
        if as_json:
            emit_json({"dry_run": True, "title": plan.title, "plan": list(plan.lines), "problems": [p.text() for p in problems]})
        else:
            click.echo(f"dry run: nothing sent — {plan.title}")
            for line in plan.lines:
                click.echo(f"  {line}")
        refuse_on(problems)
        return
    refuse_on(problems)
    outcome = action.run(echo_line)
    done = outcome.data
    if as_json:
        emit_json({"pid": done.pid, "signal": done.signal, "gpus": list(done.gpus), "pod": done.pod, "foreign": done.pod is None,
                   "user": done.user, "command": done.command, "exited": done.exited})
        return
    click.echo(f"✓ {outcome.message}")
    if outcome.hint:
        click.echo(f"  hint: {outcome.hint}")
