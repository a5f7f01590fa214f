"""The estate file as the front ends read it: which file, its pods, `c3 pod list` and `c3 pod validate`
(each a named query with a typed result; writes are `backend.actions`). `c3 pod status`, which asks the
runtime, is `backend.views.estate_status`: its rows' models (engine metrics, placement) are not built
for a listing (issue 22)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from backend.errors import Refused
from backend.models import FitReport, Pod
from backend.models.estate import Problem

if TYPE_CHECKING:
    from backend.runtime.context import RuntimeContext


def estate_path(file: Path | None = None) -> Path:
    """The estate file a command acts on: `--file` (with `~` expanded), else `$C3_HOME/estate.yml`."""
    from backend.paths import estate_file

    return Path(file).expanduser() if file is not None else estate_file()


def planned_pods(path: Path) -> list[Pod]:
    """The pods `path` plans; none when it does not exist. Raises UsageError for a malformed file."""
    from backend.estate import load_estate

    return list(load_estate(path).pods)


def proposed_port(path: Path, default_port: int) -> int:
    """The port a new pod of a slug whose default is `default_port` gets in `path`: that default plus
    20 per pod already planned, then the first one neither in the file nor bound on this host."""
    from backend.estate import default_port as propose
    from backend.estate import load_estate
    from backend.models import Estate

    return propose(load_estate(path) if path.exists() else Estate(), default_port)


def port_problem(text: str, taken: Mapping[int, str], *, on_host: bool) -> str | None:
    """Why a new pod cannot take the port typed as `text` (`backend.estate.ports.new_pod_port_problem`):
    `taken` maps the estate's ports to their pods; `on_host` also binds to see whether something on this
    machine listens there (blocks: off the event loop only)."""
    from backend.estate.ports import host_port_bound, new_pod_port_problem

    return new_pod_port_problem(text, taken, is_bound=host_port_bound if on_host else None)


class PodPlanListing(BaseModel):
    """`c3 pod list --json`: the planned pods, the GPUs they claim and the GPUs still free."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    file: str
    """The estate file."""
    exists: bool
    """The file exists (a missing file plans no pods)."""
    pods: list[Pod]
    """Its pods, in file order."""
    claimed_gpus: list[int]
    """Host GPU indices some pod plans, sorted."""
    free_gpus: list[int] | None
    """This machine's GPUs no pod plans; None when there is no GPU probe (see `free_problem`)."""
    free_problem: str | None = None
    """Why the free GPUs are unknown (not part of the JSON contract)."""


def pod_plan_listing(path: Path) -> PodPlanListing:
    """What `path` plans (no runtime is asked)."""
    from backend.estate import estate_exists, load_estate
    from backend.views.gpus import gpu_availability

    exists = estate_exists(path)
    pods = list(load_estate(path).pods)
    claimed = sorted({i for p in pods for i in p.gpus})
    found = gpu_availability()
    free = None if found.gpus is None else [g.index for g in found.gpus if g.index not in claimed]
    return PodPlanListing(file=str(path), exists=exists, pods=pods, claimed_gpus=claimed, free_gpus=free, free_problem=found.problem)


class EstateValidation(BaseModel):
    """`c3 pod validate`: every rule `create` applies, applied to a (hand-written) estate file."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    file: str
    """The estate file."""
    pods: list[str]
    """The names of the pods it plans (as far as it parses)."""
    problems: list[Problem]
    """Every problem: the document's own (malformed input) first, then the rules' (errors, warnings, notes)."""
    malformed: list[Problem]
    """The blocking problems of the document itself (it does not parse as an estate: exit 2)."""
    fits: dict[str, FitReport]
    """Each priced pod's fit-check."""

    @property
    def errors(self) -> list[Problem]:
        """The blocking problems (the file is invalid when there is one)."""
        return [p for p in self.problems if p.blocking]


def validate_estate_file(path: Path, *, force: bool = False) -> EstateValidation:
    """Check `path` with every rule `create` applies (GPU rules skipped without a probe); Refused when
    there is no file."""
    from backend.catalog import load_catalog
    from backend.estate import check_estate, estate_exists, parse_document, read_document
    from backend.views.gpus import gpu_availability

    if not estate_exists(path):
        raise Refused(f"no estate file at {path}")
    estate, parsed = parse_document(read_document(path), str(path))
    check = check_estate(estate, gpu_availability().gpus, load_catalog(), force=force)
    return EstateValidation(file=str(path), pods=[p.name for p in estate.pods], problems=parsed + check.problems,
                            malformed=[p for p in parsed if p.blocking], fits=dict(check.fits))


def health_path_of(ctx: RuntimeContext) -> Callable[[Pod], str]:
    """Each pod's health path, from the context's catalog (loaded once, on the first pod that asks)."""
    from backend.catalog import load_catalog
    from backend.catalog.health import health_path

    def catalog() -> Any:
        if ctx.catalog is None:
            ctx.catalog = load_catalog()
        return ctx.catalog

    return lambda pod: health_path(catalog, pod)
