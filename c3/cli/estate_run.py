"""`c3 up` / `c3 down`: boot or stop the whole estate (or `--only` some of its pods)."""

from __future__ import annotations

from pathlib import Path

import click

from backend.actions import refuse_on
from backend.actions.workspace import Workspace
from backend.errors import Refused, UsageError
from backend.models import Pod
from backend.views.estate_file import estate_path as resolve_file
from backend.views.estate_file import planned_pods as load_pods
from c3.cli.common import file_option
from c3.cli.pod_runtime import echo_step, gpu_mode_option, report_outcome


def select(pods: list[Pod], only: str | None, path: Path) -> list[Pod]:
    """The pods `--only a,b` names (in file order), or all of them."""
    if not only:
        return pods
    names = [n.strip() for n in only.split(",") if n.strip()]
    if not names:
        raise UsageError("--only must name at least one pod")
    known = {p.name.casefold(): p for p in pods}
    unknown = [n for n in names if n.casefold() not in known]
    if unknown:
        raise Refused(f"--only names pod(s) not in {path}: {', '.join(unknown)}", hint=f"pods in the file: {', '.join(p.name for p in pods) or 'none'}")
    wanted = {n.casefold() for n in names}
    return [p for p in pods if p.name.casefold() in wanted]


@click.command("up")
@click.option("--only", default=None, help="Boot only these pods, e.g. --only chat,coder.")
@click.option("--parallel", is_flag=True, help="Boot the pods concurrently (about as long as the slowest).")
@click.option("--jobs", type=click.IntRange(1, 64), default=None, help="With --parallel: pods booting at once (default: all).")
@click.option("--stagger", type=click.FloatRange(0), default=0.0, show_default=True, help="With --parallel: seconds between launches.")
@click.option("--force", is_flag=True, help="Pass failing gates with a warning.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(1), default=900.0, show_default=True, help="Seconds each pod may take to serve.")
@gpu_mode_option
@file_option
def up(only: str | None, parallel: bool, jobs: int | None, stagger: float, force: bool, timeout_s: float, gpu_mode: str | None, file: Path | None) -> None:
    """Boot the whole estate (pods already running are left alone)."""
    import time

    from backend.actions.boot_pods import BootPods

    if (jobs is not None or stagger) and not parallel:
        raise UsageError("--jobs and --stagger go with --parallel")
    path = resolve_file(file)
    pods = select(load_pods(path), only, path)
    if not pods:
        click.echo(f"no pods in {path}")
        return
    ws = Workspace(path, forced_mode=gpu_mode)
    ws.ctx.runtime.workloads()  # an unreachable daemon is one line and exit 3 here, not N failed pods
    action = BootPods(ws, tuple(p.name for p in pods), force=force, timeout_s=timeout_s, parallel=parallel, jobs=jobs, stagger_s=stagger, isolate=True)
    refuse_on(action.problems())
    started = time.monotonic()
    if parallel and len(pods) > 1:
        click.echo(f"booting {len(pods)} pods in parallel (jobs={jobs or len(pods)}, stagger={stagger:g} s)")
    outcomes = action.run(echo_step).data
    failures = []
    port_of = {p.name: p.port for p in pods}
    for outcome in outcomes:
        try:
            report_outcome(outcome, port_of.get(outcome.pod))
        except Refused as error:
            click.echo(f"c3: {error.message}", err=True)
            failures.append(outcome.pod)
    mismatched = [o.pod for o in outcomes if o.ok and o.placement is not None and o.placement.verdict == "mismatch"]
    healthy = sum(1 for o in outcomes if o.ok)
    click.echo(f"{healthy}/{len(outcomes)} pods serving after {time.monotonic() - started:.1f} s" + (f"; placement mismatch: {', '.join(mismatched)}" if mismatched else ""))
    if failures or mismatched:
        raise Refused(f"{len(failures)} pod(s) failed: {', '.join(failures)}" if failures else f"placement mismatch: {', '.join(mismatched)}", hint="boot logs are under $C3_STATE/boot/")


@click.command("down")
@click.option("--only", default=None, help="Stop only these pods.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(0), default=30.0, show_default=True, help="Seconds to wait before killing each.")
@file_option
def down(only: str | None, timeout_s: float, file: Path | None) -> None:
    """Stop the estate's pods (all, or --only some)."""
    from backend.actions.stop_all import StopPods

    path = resolve_file(file)
    pods = select(load_pods(path), only, path)
    for name, stopped in StopPods(Workspace(path), tuple(p.name for p in pods), timeout_s=timeout_s).run(echo_step).data:
        click.echo(f"[{name}] {'stopped' if stopped else 'was not running'}")
