"""Changing the estate file: create, edit and remove a pod, each one read-modify-write under the lock.

Nothing is written unless every rule passes; the lock is held across read, validation and write so
two terminals (or the CLI and the cockpit) creating pods at once never lose each other's pod.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backend import limits
from backend.atomic import locked
from backend.errors import C3Error, Refused, UsageError, os_failure
from backend.estate import ports
from backend.estate.io import NAME_RULE, estate_exists, load_estate, save_estate, valid_pod_name
from backend.estate.ports import default_port
from backend.estate.validate import FitFunction, check_estate
from backend.models.catalog import CatalogEntry
from backend.models.estate import Estate, Pod, Problem
from backend.models.fit import FitReport
from backend.models.gpu import Gpu

IsRunning = Callable[[Pod], bool | None]
"""Asks the runtime whether a pod's container runs: True, False, or None when it cannot tell."""


@dataclass
class CreateResult:
    """What `create_pod` did: the pod written, its fit, and what the user should still read."""

    path: Path
    pod: Pod
    entry: CatalogEntry
    fit: FitReport | None
    port_chosen: bool
    warnings: list[Problem] = field(default_factory=list)


@dataclass
class RemoveResult:
    """What `remove_pod` did."""

    path: Path
    pod: Pod
    warning: str | None = None


def _refusal(name: str, errors: Sequence[Problem], doing: str = "create pod") -> Refused:
    first_hint = next((p.hint for p in errors if p.hint), None)
    joined = "; ".join(p.message for p in errors)
    return Refused(f"cannot {doing} `{name}` — {joined}", hint=first_hint)


def check_lone_pod(pod: Pod, gpus: list[Gpu] | None, catalog: Any, *, force: bool = False, fit: FitFunction | None | str = "default") -> tuple[list[Problem], FitReport | None]:
    """The rules `pod create` applies (TP count, required_sm, homogeneous arch, status, fit), for a pod
    that lives in no estate file (`c3 serve`). Refused on a blocking problem; warnings come back."""
    check = check_estate(Estate(pods=[pod]), gpus, catalog, force=force, fit=fit, price={pod.name})
    mine = check.about(pod.name)
    errors = [p for p in mine if p.blocking]
    if errors:
        raise _refusal(pod.slug, errors, doing="serve")
    return [p for p in mine if not p.blocking], check.fits.get(pod.name)


@contextlib.contextmanager
def _file_errors(path: Path) -> Iterator[None]:
    """A folder that cannot be created or written (a file in the way, no permission, a read-only or
    full file system, a name too long) is the file system refusing: one line with the path, exit 3."""
    try:
        yield
    except C3Error:
        raise
    except OSError as error:
        raise os_failure(error, path, "write estate file", hint="check the --file path, its folder's permissions and free space") from None


def _touched(estate: Estate) -> dict[str, Any]:
    """The kept top-level keys, with club-3090's `updated` stamp refreshed when the file has one."""
    extra = dict(estate.extra)
    if "updated" in extra:
        extra["updated"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return extra


def check_name(name: str) -> None:
    """A usage error unless `name` is a valid pod name."""
    if not valid_pod_name(name):
        raise UsageError(f"pod name `{name[:60]}` is not valid: use {NAME_RULE}", hint="e.g. `chat`, `coder-2`")


def _check_args(gpu_indices: Sequence[int], port: int | None) -> None:
    if not gpu_indices:
        raise UsageError("--gpus must list at least one index, e.g. --gpus 1,2")
    if port is not None and not limits.is_port(port):
        raise UsageError(f"--port {port} is not a TCP port (1–65535)")


@dataclass(frozen=True)
class PlannedPod:
    """A new pod checked against the estate it joins (what `create_pod` writes)."""

    pod: Pod
    entry: Any
    estate: Estate
    """The estate with the pod appended."""
    check: Any
    warnings: list[Problem]


def plan_pod(
    estate: Estate,
    name: str,
    gpu_indices: Sequence[int],
    slug: str,
    *,
    gpus: list[Gpu],
    catalog: Any,
    port: int | None = None,
    force: bool = False,
    fit: FitFunction | None | str = "default",
    is_bound: Callable[[int], bool] | None | str = "host",
    path: Path | None = None,
    on_demand: bool = False,
    sleep_mode: bool = False,
    at: int | None = None,
    doing: str = "create pod",
) -> PlannedPod:
    """Every rule a new pod must pass in `estate` (name, slug, GPUs, fit, the other pods), writing
    nothing: `create_pod` runs it under the file lock, the cockpit's confirm gate beforehand. Raises
    as `create_pod` does. `at`: its place among the pods (default: last); `doing`: what a refusal says
    was refused (`plan_edit` plans the edited pod here too)."""
    if is_bound == "host":
        is_bound = ports.host_port_bound  # looked up now, so a test can replace the host check
    _check_args(gpu_indices, port)
    clash = next((p for p in estate.pods if p.name.casefold() == name.casefold()), None)
    if clash is not None:
        where = f" in {path}" if path is not None else ""
        raise Refused(f"pod `{clash.name}` already exists{where}", hint=f"`c3 pod rm {clash.name}` first, or choose another name")
    check_name(name)
    try:
        entry = catalog.get(slug)
    except C3Error:
        entry = None
    if entry is None:
        raise Refused(f"unknown slug `{slug}`", hint="`c3 catalog` lists the slugs; your own go in $C3_HOME/catalog.d/")
    chosen_port = port if port is not None else default_port(estate, entry.default_port, is_bound=is_bound)  # type: ignore[arg-type]
    uuids = None
    if all(0 <= i < len(gpus) for i in gpu_indices):
        uuids = tuple(gpus[i].uuid for i in gpu_indices)
    pod = Pod(name=name, slug=entry.slug, gpus=tuple(gpu_indices), port=chosen_port, uuids=uuids, on_demand=on_demand,
              sleep_mode=sleep_mode)
    placed = list(estate.pods)
    placed.insert(len(placed) if at is None else at, pod)
    candidate = Estate(schema_version=estate.schema_version, pods=placed, extra=_touched(estate))
    check = check_estate(candidate, gpus, catalog, force=force, fit=fit, price={name})
    mine = check.about(name)
    errors = [p for p in mine if p.blocking]
    if errors:
        raise _refusal(name, errors, doing)
    warnings = [p for p in mine if not p.blocking]
    if port is not None and callable(is_bound) and is_bound(port):
        warnings.append(
            Problem(code="port", severity="warning", pod=name, pods=(name,), message=f"port {port} is in use on this host right now; `c3 pod up {name}` will refuse until it is free")
        )
    return PlannedPod(pod, entry, candidate, check, warnings)


def create_pod(
    path: Path,
    name: str,
    gpu_indices: Sequence[int],
    slug: str,
    *,
    gpus: list[Gpu],
    catalog: Any,
    port: int | None = None,
    force: bool = False,
    fit: FitFunction | None | str = "default",
    is_bound: Callable[[int], bool] | None | str = "host",
    on_demand: bool = False,
    sleep_mode: bool = False,
) -> CreateResult:
    """Plan a pod: validate it with the whole estate and append it, or raise and write nothing.

    Raises UsageError (bad name, empty GPU list, malformed file), Refused (duplicate name, unknown
    slug, any validation error).
    """
    path = Path(path)
    if isinstance(is_bound, str):  # "host", the only string
        is_bound = ports.host_port_bound  # looked up now, so a test can replace the host check
    _check_args(gpu_indices, port)  # before the file is even read
    with _file_errors(path), locked(path):
        estate = load_estate(path)
        planned = plan_pod(estate, name, gpu_indices, slug, gpus=gpus, catalog=catalog, port=port, force=force, fit=fit, is_bound=is_bound, path=path,
                            on_demand=on_demand, sleep_mode=sleep_mode)
        pod, candidate, check, warnings = planned.pod, planned.estate, planned.check, planned.warnings
        entry = planned.entry
        save_estate(path, candidate)
    return CreateResult(path=path, pod=pod, entry=entry, fit=check.fits.get(name), port_chosen=port is None, warnings=warnings)


def plan_edit(
    estate: Estate,
    name: str,
    *,
    gpu_indices: Sequence[int] | None = None,
    slug: str | None = None,
    port: int | None = None,
    gpus: list[Gpu],
    catalog: Any,
    force: bool = False,
    fit: FitFunction | None | str = "default",
    is_bound: Callable[[int], bool] | None | str = "host",
    path: Path | None = None,
) -> PlannedPod:
    """Pod `name` with new GPUs, slug and/or port (what is not given stays), checked by `plan_pod`'s
    every rule against the other pods, writing nothing; the pod keeps its place in the file. Raises as
    `plan_pod` does, and UsageError when nothing would change."""
    old = next((p for p in estate.pods if p.name.casefold() == name.casefold()), None)
    if old is None:
        names = ", ".join(p.name for p in estate.pods) or "none"
        where = f" in {path}" if path is not None else ""
        raise Refused(f"pod `{name}` not found{where}", hint=f"pods in the file: {names}")
    if gpu_indices is None and slug is None and port is None:
        raise UsageError(f"nothing to edit in pod `{old.name}`: give --gpus, --port or --slug", hint=f"e.g. `c3 pod edit {old.name} --port 8040`")
    if is_bound == "host":
        is_bound = ports.host_port_bound  # looked up now, so a test can replace the host check
    probe = is_bound if callable(is_bound) else None
    # The pod's own port is bound while it runs: that is no reason to warn about keeping it.
    bound = (lambda p: p != old.port and probe(p)) if probe is not None else None
    others = Estate(schema_version=estate.schema_version, pods=[p for p in estate.pods if p is not old], extra=estate.extra)
    planned = plan_pod(others, old.name, tuple(gpu_indices) if gpu_indices is not None else old.gpus, slug if slug is not None else old.slug,
                       gpus=gpus, catalog=catalog, port=port if port is not None else old.port, force=force, fit=fit, is_bound=bound, path=path,
                       on_demand=old.on_demand, sleep_mode=old.sleep_mode, at=estate.pods.index(old), doing="edit pod")
    return PlannedPod(planned.pod, planned.entry, planned.estate.model_copy(update={"extra": estate.extra}), planned.check, planned.warnings)


@dataclass
class EditResult:
    """What `edit_pod` wrote: the pod before and after, its fit and the warnings."""

    path: Path
    before: Pod
    pod: Pod
    fit: FitReport | None
    warnings: list[Problem] = field(default_factory=list)


def edit_pod(path: Path, name: str, *, gpus: list[Gpu], catalog: Any, gpu_indices: Sequence[int] | None = None, slug: str | None = None,
             port: int | None = None, force: bool = False, fit: FitFunction | None | str = "default",
             is_bound: Callable[[int], bool] | None | str = "host") -> EditResult:
    """Edit a pod in place under the file lock: every rule of `create_pod` on the edited pod, or raise
    and write nothing (the file is untouched byte for byte)."""
    path = Path(path)
    if not estate_exists(path):
        raise Refused(f"no estate file at {path}", hint="`c3 pod create` makes one")
    with _file_errors(path), locked(path):
        estate = load_estate(path)
        planned = plan_edit(estate, name, gpu_indices=gpu_indices, slug=slug, port=port, gpus=gpus, catalog=catalog, force=force, fit=fit,
                            is_bound=is_bound, path=path)
        before = next(p for p in estate.pods if p.name.casefold() == name.casefold())
        if planned.pod == before:
            return EditResult(path, before, planned.pod, planned.check.fits.get(planned.pod.name), planned.warnings)  # nothing changes: no write
        save_estate(path, planned.estate.model_copy(update={"extra": _touched(estate)}))  # the `updated` stamp, as create's
    return EditResult(path, before, planned.pod, planned.check.fits.get(planned.pod.name), planned.warnings)


def remove_pod(path: Path, name: str, *, is_running: IsRunning | None = None) -> RemoveResult:
    """Remove a pod from the file; refuse while its container runs.

    When the runtime cannot tell (Docker unreachable) the pod is removed from the plan with a
    warning: the file is only a plan, and refusing would leave the user unable to edit it while
    Docker is down. The warning names the container to stop by hand.
    """
    path = Path(path)
    if not estate_exists(path):
        raise Refused(f"no estate file at {path}", hint="`c3 pod create` makes one")
    with _file_errors(path), locked(path):
        estate = load_estate(path)
        pod = next((p for p in estate.pods if p.name.casefold() == name.casefold()), None)
        if pod is None:
            names = ", ".join(p.name for p in estate.pods) or "none"
            raise Refused(f"pod `{name}` not found in {path}", hint=f"pods in the file: {names}")
        warning = None
        running: bool | None = False
        if is_running is not None:
            try:
                running = is_running(pod)
            except C3Error as error:
                running = None
                warning = f"could not ask the runtime whether c3-{pod.name} runs ({error.message})"
            except Exception as error:  # noqa: BLE001 - e.g. docker-py's own errors from a caller's hook
                running = None
                warning = f"could not ask the runtime whether c3-{pod.name} runs ({type(error).__name__}: {error})"
        if running:
            raise Refused(f"pod `{pod.name}` is running — `c3 pod down {pod.name}` first")
        if running is None:
            warning = (warning or f"could not tell whether c3-{pod.name} runs") + f"; removed from the plan anyway — if it runs, stop it with `docker rm -f c3-{pod.name}`"
        remaining = Estate(schema_version=estate.schema_version, pods=[p for p in estate.pods if p is not pod], extra=_touched(estate))
        save_estate(path, remaining)
    return RemoveResult(path=path, pod=pod, warning=warning)
