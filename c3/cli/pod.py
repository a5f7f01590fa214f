"""`c3 pod create|edit|list|rm|validate`: plan pods in the estate file.

The runtime verbs (`up`, `down`, `status`, `logs`) are attached at the bottom by
`c3.cli.pod_runtime.register(pod)` when that module is installed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from backend.actions.workspace import Workspace
from backend.errors import C3Error, EnvironmentProblem
from backend.models.estate import Pod, Problem
from backend.models.fit import FitReport
from backend.views.estate_file import estate_path as resolve_file
from c3.cli.common import PORT, echo_line, emit_json, file_option, json_option, parse_index_list
from c3.cli.terminal import error_line

F = TypeVar("F", bound=Callable[..., Any])


def _file_flag(file: Path | None) -> str:
    return f" --file {file}" if file is not None else ""


def _gib(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def describe_fit(report: FitReport | None) -> str:
    """One phrase: the verdict with the GiB numbers behind it (smallest rank)."""
    if report is None:
        return "fit not priced (fit-check unavailable)"
    if report.verdict == "unknown":
        why = f": {report.reasons[0]}" if report.reasons else ""
        return f"fit unknown — not priced{why}"
    rank = min(report.gpus, key=lambda g: g.available_kv_gib) if report.gpus else None
    if rank is None:
        return f"fit: {report.verdict}"
    text = (
        f"fit: {report.verdict} — weights {_gib(rank.weights_gib)} GiB + KV {_gib(rank.available_kv_gib)} GiB "
        f"of a {_gib(rank.budget_gib)} GiB budget per GPU ({_gib(rank.total_gib)} GiB visible)"
    )
    if report.kv_cache_tokens:
        text += f", {report.kv_cache_tokens:,} KV tokens"
    return text


def _warn(problem: Problem) -> None:
    mark = "⚠" if problem.severity == "warning" else "·"
    click.echo(f"  {mark} {problem.message}")


@click.group("pod", context_settings={"help_option_names": ["-h", "--help"]})
def pod() -> None:
    """Plan pods: one model pinned to a GPU set and a port, in the estate file."""


def _pod_json(p: Pod) -> dict[str, Any]:
    """A pod as `pod create --json` and `pod edit --json` print it."""
    return {"name": p.name, "slug": p.slug, "gpus": list(p.gpus), "port": p.port, "uuids": list(p.uuids or ()), "on_demand": p.on_demand,
            "sleep_mode": p.sleep_mode}


def _pod_options(*, edit: bool) -> Callable[[F], F]:
    """NAME, --gpus, --slug, --port and --force: what `create` requires and `edit` may change."""
    gpus_help = "GPU indices, e.g. 0,1 (count = the slug's TP × PP)."
    slug_help = "atalog entry, e.g. vllm/qwen3-8b (`c3 catalog` lists them)."
    options = [
        click.argument("name"),
        # No `default=None` with `required`: click (8.2) then takes None for a value and stops requiring one.
        click.option("--gpus", "gpus_text", required=not edit, help=("New host " if edit else "Host ") + gpus_help),
        click.option("--slug", required=not edit, help=("New c" if edit else "C") + slug_help),
        click.option("--port", type=PORT, default=None,
                     help="New host port." if edit else "Host port (default: slug default + 20 × pods, first free)."),
        click.option("--force", is_flag=True, help="Allow experimental/deprecated slugs and a wont-fit verdict."),
    ]

    def apply(func: F) -> F:
        for option in reversed(options):
            func = option(func)
        return func

    return apply


@pod.command("create")
@_pod_options(edit=False)
@click.option("--on-demand", "on_demand", is_flag=True,
              help="Started and stopped by `c3 gateway serve` as requests need it; may share GPUs with other on-demand pods.")
@click.option("--sleep-mode", "sleep_mode", is_flag=True,
              help="vLLM only: launch with sleep mode, so the gateway puts it to sleep (level 1) and wakes it instead of stopping it.")
@json_option
@file_option
def create(name: str, gpus_text: str, slug: str, port: int | None, force: bool, on_demand: bool, sleep_mode: bool, as_json: bool,
           file: Path | None) -> None:
    """Plan pod NAME on --gpus with --slug: fit-checked and validated, then written to the estate file."""
    from backend.actions import NewPod
    from backend.actions.create_pod import CreatePod

    path = resolve_file(file)
    indices = parse_index_list(gpus_text)
    result = CreatePod(Workspace(path), NewPod(name, slug, tuple(indices), port, on_demand, sleep_mode), force=force).run(echo_line).data
    p = result.pod
    if as_json:
        emit_json(
            {
                "file": str(path),
                "pod": _pod_json(p),
                "port_chosen": result.port_chosen,
                "fit": result.fit.model_dump(mode="json") if result.fit is not None else None,
                "warnings": [w.model_dump(mode="json") for w in result.warnings],
            }
        )
        return
    how = "" if not result.port_chosen else " (first free)"
    click.echo(f"✓ created pod `{p.name}`: {p.slug} on GPU {list(p.gpus)} port {p.port}{how}{' (on demand)' if p.on_demand else ''} — {describe_fit(result.fit)}")
    for problem in result.warnings:
        if problem.severity == "warning":
            _warn(problem)
    for problem in result.warnings:
        if problem.severity == "note":
            _warn(problem)
    click.echo(f"  boot it: c3 pod up {p.name}{_file_flag(file)}")


@pod.command("edit")
@_pod_options(edit=True)
@click.option("--yes", "-y", "yes", is_flag=True, help="Restart a running pod with the new settings without asking.")
@click.option("--dry-run", is_flag=True, help="Check and show the edit; change nothing.")
@json_option
@file_option
def edit(name: str, gpus_text: str | None, slug: str | None, port: int | None, force: bool, yes: bool, dry_run: bool, as_json: bool,
         file: Path | None) -> None:
    """Edit pod NAME in place: --gpus, --port and/or --slug, checked as `create` checks a new pod (a running pod restarts)."""
    import sys

    from backend.actions.edit_pod import EditPod
    from backend.actions.inputs import PodEdit
    from backend.errors import Refused

    path = resolve_file(file)
    indices = tuple(parse_index_list(gpus_text)) if gpus_text is not None else None
    action = EditPod(Workspace(path), PodEdit(name, indices, port, slug), force=force)
    planned = action.planned()  # every refusal here, with its own exit code, before anything is written
    before = action.ws.pod(name)
    running = action.running()
    changed = [f for f in ("slug", "gpus", "port") if getattr(before, f) != getattr(planned.pod, f)]
    report = planned.check.fits.get(planned.pod.name)
    payload = {"file": str(path), "dry_run": dry_run, "before": _pod_json(before), "pod": _pod_json(planned.pod), "changed": changed,
               "running": running, "restart": bool(running and changed), "restarted": None,
               "fit": report.model_dump(mode="json") if report is not None else None,
               "warnings": [w.model_dump(mode="json") for w in planned.warnings]}
    if dry_run:
        if as_json:
            emit_json(payload)
            return
        click.echo("dry run: nothing written, nothing restarted")
        for line in action.plan().lines:
            click.echo(f"  {line}")
        return
    if running and changed and not yes:
        if not sys.stdin.isatty():
            raise Refused(f"pod `{before.name}` is running: editing it restarts it", hint="pass --yes to restart it with the new settings (--dry-run shows the plan)")
        for line in action.plan().lines:
            click.echo(f"  {line}")
        if not click.confirm(f"restart pod {before.name} with the new settings?", default=False):
            raise Refused(f"pod `{before.name}` not edited: the restart was not confirmed")
    outcome = action.run(lambda step: None if as_json else echo_line(step))
    done = outcome.data
    payload["restarted"] = done.restarted
    if as_json:
        emit_json(payload)
    else:
        p = done.result.pod
        if not changed:
            click.echo(f"pod `{p.name}`: nothing changed ({p.slug} on GPU {list(p.gpus)} port {p.port})")
        else:
            click.echo(f"✓ edited pod `{p.name}`: {p.slug} on GPU {list(p.gpus)} port {p.port} — {describe_fit(done.result.fit)}")
            for problem in done.result.warnings:
                _warn(problem)
            if done.restarted:
                click.echo(f"  restarted: serving with the new settings on port {p.port}")
            elif running is None:
                click.echo(f"  ⚠ could not tell whether pod {p.name} runs: if it does, it keeps its old settings until `c3 pod down`/`up`")
            elif done.restarted is None:
                click.echo(f"  boot it: c3 pod up {p.name}{_file_flag(file)}")
    if not outcome.ok:
        raise Refused(outcome.message, hint=outcome.hint)


@pod.command("list")
@json_option
@file_option
def list_pods(as_json: bool, file: Path | None) -> None:
    """List the planned pods, the GPUs they claim and the GPUs still free (no Docker calls)."""
    from backend.views.estate_file import pod_plan_listing

    path = resolve_file(file)
    listing = pod_plan_listing(path)
    if as_json:
        emit_json(
            {
                "file": listing.file,
                "exists": listing.exists,
                "pods": [{"name": p.name, "slug": p.slug, "gpus": list(p.gpus), "port": p.port, "on_demand": p.on_demand,
                          "sleep_mode": p.sleep_mode} for p in listing.pods],
                "claimed_gpus": listing.claimed_gpus,
                "free_gpus": listing.free_gpus,
            }
        )
        return
    if not listing.exists:
        click.echo(f"no estate file at {path} — create one with `c3 pod create NAME --gpus 0 --slug SLUG`")
    else:
        click.echo(f"{len(listing.pods)} pod(s) in {path}:")
        width = max((len(p.name) for p in listing.pods), default=0)
        swidth = max((len(p.slug) for p in listing.pods), default=0)
        gwidth = max((len(str(list(p.gpus))) for p in listing.pods), default=0)
        pwidth = max((len(str(p.port)) for p in listing.pods), default=0)
        for p in listing.pods:
            # `on demand`: the gateway may stop it to start another pod on its GPUs (issue 28).
            tail = f"  port {str(p.port).ljust(pwidth)}  on demand" if p.on_demand else f"  port {p.port}"
            tail += "  sleep mode" if p.sleep_mode else ""
            click.echo(f"  {p.name.ljust(width)}  {p.slug.ljust(swidth)}  GPU {str(list(p.gpus)).ljust(gwidth)}{tail}")
    if listing.free_gpus is None:
        click.echo(f"free GPU(s): unknown ({listing.free_problem})")
    else:
        click.echo(f"free GPU(s): {listing.free_gpus if listing.free_gpus else '(none)'}")


def _runtime_hook() -> Any:
    """`c3.cli.pod_runtime.is_running` (imported on first use: it pulls in the Docker adapter)."""
    from c3.cli.pod_runtime import is_running

    return is_running


def _runtime_is_running() -> Any:
    """The runtime's "does this pod's workload run?" check: True/False, or EnvironmentProblem when
    it cannot tell (Docker unreachable)."""
    hook = _runtime_hook()

    def is_running(pod: Pod) -> bool | None:
        try:
            running: bool | None = hook(pod)
            return running
        except C3Error as error:
            raise EnvironmentProblem(error.message) from error
        except Exception as error:  # noqa: BLE001 - an unreachable daemon must not block editing the plan
            raise EnvironmentProblem(f"{type(error).__name__}: {error}") from error

    return is_running


@pod.command("rm")
@click.argument("name")
@file_option
def rm(name: str, file: Path | None) -> None:
    """Remove pod NAME from the estate file (refused while it runs: `c3 pod down NAME` first)."""
    from backend.actions.remove_pod import RemovePod

    path = resolve_file(file)
    result = RemovePod(Workspace(path), name, is_running=_runtime_is_running()).run(echo_line).data
    if result.warning:
        click.echo(f"⚠ {result.warning}", err=True)
    click.echo(f"✓ removed pod `{result.pod.name}` from {path}")


@pod.command("validate")
@json_option
@file_option
@click.option("--force", is_flag=True, help="Validate as if every pod were created with --force.")
def validate(as_json: bool, file: Path | None, force: bool) -> None:
    """Check a (hand-written) estate file with every rule `create` applies; exit 1 if invalid."""
    from backend.views.estate_file import validate_estate_file

    path = resolve_file(file)
    check = validate_estate_file(path, force=force)
    problems, errors = check.problems, check.errors
    if as_json:
        emit_json(
            {
                "file": str(path),
                "valid": not errors,
                "pods": check.pods,
                "problems": [p.model_dump(mode="json") for p in problems],
                "fits": {name: report.verdict for name, report in check.fits.items()},
            }
        )
    else:
        click.echo(f"{'✓ valid' if not errors else '✗ invalid'}: {path} ({len(check.pods)} pod(s))")
        for p in problems:
            mark = {"error": "✗", "warning": "⚠", "note": "·"}[p.severity]
            click.echo(f"  {mark} {p.message}")
        for name, report in check.fits.items():
            click.echo(f"  · pod `{name}`: {describe_fit(report)}")
    if errors:
        # One exit code per class (DESIGN.md): a file that does not parse as an estate is malformed
        # input (2) wherever the problem sits; a well-formed plan that breaks a rule is refused (1).
        malformed = check.malformed
        first = (malformed or errors)[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        error_line(f"{path} is not a valid estate: {first.message}{more}")
        raise SystemExit(2 if malformed else 1)


# RUNTIME adds up/down/status/logs to the group defined above (so this import comes last).
from c3.cli import pod_runtime  # noqa: E402

pod_runtime.register(pod)
