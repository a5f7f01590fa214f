"""The one estate validation: the CLI, hand-written files and the cockpit all call `check_estate`.

Rules (codes in `Problem.code`), club-3090's first (research-club3090.md §1.3–1.4) then what it
misses: names unique ignoring case; C1 GPU count = TP × PP; E1 GPU index outside the rig and GPU
claimed by two pods (unless every pod on it is on demand: then a `shared` note); E4 port claimed by two pods; unknown slug; slug status (experimental and
deprecated need --force); compute capability (required_sm / fallback_sm); homogeneous architecture
for slugs that need it; the fit verdict (wont-fit and incompatible-hw refuse, unknown is shown as
"not priced", distinct from a fit); a rig re-ordered since the pod recorded its GPU UUIDs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.errors import C3Error
from backend.models.catalog import CatalogEntry
from backend.models.estate import Estate, Pod, Problem
from backend.models.fit import FitReport
from backend.models.gpu import Gpu

FitFunction = Callable[[CatalogEntry, list[Gpu]], FitReport]
GATED_STATUSES = ("experimental", "deprecated")


@dataclass
class EstateCheck:
    """Everything validation found, plus the fit reports it computed (the CLI prints them)."""

    problems: list[Problem] = field(default_factory=list)
    fits: dict[str, FitReport] = field(default_factory=dict)
    entries: dict[str, CatalogEntry] = field(default_factory=dict)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.blocking]

    @property
    def ok(self) -> bool:
        return not self.errors

    def about(self, name: str) -> list[Problem]:
        """Problems that involve pod `name` (its own, and collisions it is part of)."""
        return [p for p in self.problems if p.pod == name or name in p.pods]


def default_fit() -> FitFunction:
    """`backend.fit.fit_on_gpus` (imported on first use: the fit-check pulls in the catalog and model specs)."""
    from backend.fit import fit_on_gpus

    return fit_on_gpus


def _takes_catalog(fn: Callable[..., Any]) -> bool:
    try:
        return "catalog" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def sm_tuple(sm: str | None) -> tuple[int, int] | None:
    """`"8.6"` → (8, 6); None for anything else."""
    if not sm or not isinstance(sm, str):
        return None
    parts = sm.strip().split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def _short(name: str) -> str:
    return name.replace("NVIDIA ", "").replace("GeForce ", "")


def _gpu_label(gpu: Gpu) -> str:
    return f"GPU {gpu.index} ({_short(gpu.name)}, sm {gpu.sm or '?'})"


def _lookup(catalog: Any, slug: str) -> CatalogEntry | None:
    try:
        entry: CatalogEntry = catalog.get(slug)
        return entry
    except (C3Error, KeyError, LookupError):
        return None


def _problem(code: str, message: str, pod: str | None = None, *, severity: str = "error", pods: Sequence[str] = (), hint: str | None = None) -> Problem:
    involved = tuple(pods) if pods else ((pod,) if pod else ())
    return Problem(code=code, severity=severity, message=message, pod=pod, pods=involved, hint=hint)


def _fmt_gib(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def _check_names(estate: Estate, out: list[Problem]) -> None:
    first: dict[str, str] = {}
    for pod in estate.pods:
        key = pod.name.casefold()
        if key in first:
            out.append(
                _problem("name", f"duplicate pod name `{pod.name}` (also `{first[key]}`; names are unique ignoring case)", pod.name, pods=(first[key], pod.name))
            )
        else:
            first[key] = pod.name


def _listing(names: Sequence[str], most: int = 8) -> str:
    """Pod names for a message: all of a few, the first `most` of many (a line stays a line)."""
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown} and {len(names) - most} more"


def _check_cross(estate: Estate, gpus: list[Gpu] | None, out: list[Problem]) -> None:
    by_gpu: dict[int, list[str]] = {}
    by_port: dict[int, list[str]] = {}
    on_demand = {pod.name for pod in estate.pods if pod.on_demand}
    for pod in estate.pods:
        for index in dict.fromkeys(pod.gpus):  # a GPU listed twice in one pod is its own problem
            by_gpu.setdefault(index, []).append(pod.name)
        by_port.setdefault(pod.port, []).append(pod.name)
    for index in sorted(by_gpu):
        names = by_gpu[index]
        if len(names) > 1:
            label = f"GPU {index}"
            if gpus is not None and 0 <= index < len(gpus):
                label += f" ({_short(gpus[index].name)})"
            if all(n in on_demand for n in names):  # the gateway swaps them; `c3 up` never starts two at once
                out.append(_problem("shared", f"{label} shared by on-demand pods {_listing(names)} (never running at once)", pods=names, severity="note"))
                continue
            fixed = [n for n in names if n not in on_demand]
            out.append(_problem("E1", f"E1: {label} claimed by {_listing(names)}", pods=names,
                                hint=f"give each pod its own GPUs; pods may share GPUs only when every one of them is on demand "
                                     f"(`on_demand: true`, `c3 pod create … --on-demand`), and {_listing(fixed)} is not"))
    for port in sorted(by_port):
        names = by_port[port]
        if len(names) > 1:
            out.append(_problem("E4", f"E4: port {port} claimed by {_listing(names)}", pods=names, hint="choose another --port, or leave it out for a free one"))


def _check_pod(
    pod: Pod,
    entry: CatalogEntry,
    gpus: list[Gpu] | None,
    *,
    force: bool,
    fit: FitFunction | None,
    check: EstateCheck,
) -> None:
    out = check.problems
    start = len(out)  # this pod's own problems are out[start:] (check.errors would rescan all: O(n²))
    name = pod.name
    want = entry.tp * entry.pp
    if len(pod.gpus) != want:
        out.append(
            _problem(
                "C1",
                f"C1: pod `{name}`: slug `{entry.slug}` is TP={entry.tp} × PP={entry.pp} = {want} GPU(s) but you selected "
                f"{len(pod.gpus)} GPU(s) {list(pod.gpus)} (tp={entry.tp} * pp={entry.pp} = {want} != {len(pod.gpus)} cards selected)",
                name,
                hint=f"a pod's GPU count must equal the slug's tensor × pipeline parallel size; pick {want} GPU(s) or a TP={len(pod.gpus)} slug",
            )
        )
    if len(set(pod.gpus)) != len(pod.gpus):
        out.append(_problem("E1", f"E1: pod `{name}` lists a GPU twice: {list(pod.gpus)}", name))
    if pod.sleep_mode and entry.engine != "vllm":
        out.append(_problem("sleep", f"pod `{name}`: sleep_mode is for vLLM pods, and slug `{entry.slug}` runs {entry.engine}: the gateway stops "
                                     "and boots it instead", name, severity="warning"))

    if entry.status in GATED_STATUSES:
        why = f": {entry.status_note}" if entry.status_note else ""
        if force:
            out.append(_problem("status", f"pod `{name}`: slug `{entry.slug}` is {entry.status}{why} (allowed by --force)", name, severity="warning"))
        else:
            out.append(
                _problem("status", f"pod `{name}`: slug `{entry.slug}` is {entry.status}{why}", name, hint="pass --force to plan it anyway")
            )

    if gpus is None:
        return
    detected = [g.index for g in gpus]
    outside = [i for i in pod.gpus if not 0 <= i < len(gpus)]
    if outside:
        what = "GPU index" if len(outside) == 1 else "GPU indices"
        listed = ", ".join(str(i) for i in outside)
        out.append(
            _problem(
                "E1",
                f"E1: pod `{name}`: {what} {listed} not present (detected: {detected}; rig size {len(gpus)})",
                name,
                hint="`c3 gpus` lists this machine's GPUs",
            )
        )
        return
    chosen = [gpus[i] for i in pod.gpus]

    if pod.uuids is not None:
        for gpu, recorded in zip(chosen, pod.uuids, strict=False):
            if recorded != gpu.uuid:
                out.append(
                    _problem(
                        "uuid",
                        f"pod `{name}`: GPU {gpu.index} was {recorded} when the pod was planned but is now {gpu.uuid} (the rig was re-ordered or a card changed)",
                        name,
                        severity="warning",
                        hint="check the GPU list with `c3 gpus` and fix the pod's gpus",
                    )
                )

    required = sm_tuple(entry.required_sm)
    fallback = sm_tuple(entry.fallback_sm)
    floor = min(x for x in (required, fallback) if x is not None) if (required or fallback) else None
    if floor is not None:
        for gpu in chosen:
            have = sm_tuple(gpu.sm)
            if have is None:
                out.append(
                    _problem("sm", f"pod `{name}`: {_gpu_label(gpu)} reports no compute capability; slug `{entry.slug}` needs sm {entry.required_sm}", name, severity="warning")
                )
            elif have < floor:
                need = entry.fallback_sm or entry.required_sm
                out.append(
                    _problem(
                        "sm",
                        f"pod `{name}`: {_gpu_label(gpu)} is below sm {need}, which slug `{entry.slug}` needs (TP={entry.tp})",
                        name,
                        hint="choose GPUs of a newer architecture or another slug",
                    )
                )
            elif required is not None and have < required:
                out.append(
                    _problem(
                        "sm",
                        f"pod `{name}`: {_gpu_label(gpu)} is below sm {entry.required_sm}; slug `{entry.slug}` runs there on its slower sm {entry.fallback_sm} path",
                        name,
                        severity="warning",
                    )
                )

    sms = {gpu.sm for gpu in chosen}
    if len(chosen) > 1 and len(sms) > 1:
        listing = ", ".join(_gpu_label(g) for g in chosen)
        if entry.requires_homogeneous_arch:
            out.append(
                _problem(
                    "arch",
                    f"pod `{name}`: slug `{entry.slug}` needs one GPU architecture across its TP={entry.tp} group, but the set mixes {listing}",
                    name,
                    hint="pick GPUs of one kind (same compute capability) for this slug",
                )
            )
        else:
            out.append(_problem("arch", f"pod `{name}`: TP={entry.tp} across mixed architectures ({listing}) is not validated for `{entry.slug}`", name, severity="warning"))

    totals = {gpu.cuda_total_mib for gpu in chosen}
    if len(chosen) > 1 and len(totals) > 1 and None not in totals:
        small = min(chosen, key=lambda g: g.cuda_total_mib or 0)
        out.append(
            _problem(
                "hetero",
                f"pod `{name}`: GPUs of different sizes — every rank is sized by the smallest, {_gpu_label(small)} "
                f"with {(small.cuda_total_mib or 0) / 1024:.2f} GiB visible",
                name,
                severity="note",
            )
        )

    if any(p.blocking for p in out[start:]) or fit is None or len(chosen) != want:
        return  # like club-3090's C12: only price a pod that passed the structural rules
    try:
        report = fit(entry, chosen)
    except C3Error as error:
        out.append(_problem("fit", f"pod `{name}`: fit not priced — {error.message}", name, severity="warning"))
        return
    except Exception as error:  # noqa: BLE001 - a fit-check bug must not break planning; shown, not hidden
        out.append(_problem("fit", f"pod `{name}`: fit not priced — internal error in the fit-check ({type(error).__name__}: {error})", name, severity="warning"))
        return
    check.fits[name] = report
    on = ", ".join(f"GPU {g.index}" for g in chosen)
    why = "; ".join(report.reasons) if report.reasons else ""
    detail = f" — {why}" if why else ""
    if report.verdict == "incompatible-hw":
        out.append(_problem("fit", f"pod `{name}`: slug `{entry.slug}` cannot run on {on}: incompatible-hw{detail}", name))
    elif report.verdict == "wont-fit":
        message = (
            f"pod `{name}`: slug `{entry.slug}` does not fit the selected GPU(s) {on}: wont-fit "
            f"(KV left {_fmt_gib(report.available_kv_gib)} GiB){detail}"
        )
        if force:
            out.append(_problem("fit", message + " (allowed by --force)", name, severity="warning"))
        else:
            out.append(_problem("fit", message, name, hint="choose larger GPUs, a smaller slug, or a shorter --max-model-len; --force plans it anyway"))
    elif report.verdict == "tight":
        out.append(_problem("fit", f"pod `{name}`: `{entry.slug}` on {on} is tight{detail}", name, severity="warning"))
    elif report.verdict == "unknown":
        out.append(_problem("fit", f"pod `{name}`: `{entry.slug}` on {on} is not priced (fit unknown){detail}", name, severity="warning"))


def _memoized(fit: FitFunction) -> FitFunction:
    """One price per (slug, GPU set) within one check: an estate of thousands of pods repeats a few
    slugs on a few GPU sets, and pricing is the slow part."""
    seen: dict[tuple[str, tuple[str, ...]], FitReport] = {}

    def priced(entry: CatalogEntry, chosen: list[Gpu]) -> FitReport:
        key = (entry.slug, tuple(f"{g.uuid}|{g.total_mib}|{g.sm}|{getattr(g, 'cuda_total_mib', None)}" for g in chosen))
        if key not in seen:
            seen[key] = fit(entry, chosen)
        return seen[key]

    return priced


def check_estate(
    estate: Estate,
    gpus: list[Gpu] | None,
    catalog: Any,
    *,
    force: bool = False,
    fit: FitFunction | None | str = "default",
    price: set[str] | None = None,
) -> EstateCheck:
    """Validate a whole estate against this rig's GPUs (None: skip GPU rules) and the catalog.

    `price` limits the fit-check to those pods (create prices only the new one: the others were
    priced when they were planned, and pricing is the slow part).
    """
    fit_fn: FitFunction | None = default_fit() if isinstance(fit, str) else fit  # the only string is "default"
    if fit == "default" and fit_fn is not None and catalog is not None and _takes_catalog(fit_fn):
        plain: Callable[..., FitReport] = fit_fn
        # Hand the catalog we already hold to the fit-check instead of letting it load one per pod.
        fit_fn = lambda entry, chosen: plain(entry, chosen, catalog=catalog)  # noqa: E731
    if fit_fn is not None:
        fit_fn = _memoized(fit_fn)
    check = EstateCheck()
    _check_names(estate, check.problems)
    for pod in estate.pods:
        if catalog is None:
            continue  # no catalog to check slugs against; the note below says so
        entry = _lookup(catalog, pod.slug)
        if entry is None:
            check.problems.append(
                _problem("slug", f"pod `{pod.name}`: unknown slug `{pod.slug}`", pod.name, hint="`c3 catalog` lists the slugs; your own go in $C3_HOME/catalog.d/")
            )
            continue
        check.entries[pod.name] = entry
        priced = fit_fn if price is None or pod.name in price else None
        _check_pod(pod, entry, gpus, force=force, fit=priced, check=check)
    _check_cross(estate, gpus, check.problems)
    if catalog is None:
        check.problems.append(_problem("catalog", "slug rules skipped: no catalog", severity="note"))
    if gpus is None:
        check.problems.append(_problem("gpus", "GPU rules skipped: no GPU probe answered", severity="note"))
    return check


def validate_estate(estate: Estate, gpus: list[Gpu] | None, catalog: Any, *, force: bool = False, fit: FitFunction | None | str = "default") -> list[Problem]:
    """Every problem in `estate` (errors block a write; warnings are shown)."""
    return check_estate(estate, gpus, catalog, force=force, fit=fit).problems
