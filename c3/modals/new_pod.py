"""New-pod `[N]`: name (validated as typed), a slug picker ranked by fit on the chosen GPUs, the GPU set
(prefilled with free GPUs sized to the slug's TP), a proposed port, and the live fit breakdown.

Returns a `NewPod` (the app then shows the confirm gate) or None. Every fit-check runs in a thread
worker; a generation counter drops answers that arrive after the inputs have changed again.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, Input, OptionList, Static
from textual.widgets.option_list import Option

if TYPE_CHECKING:
    from textual.timer import Timer

    from backend.models import CatalogEntry, FitReport

from backend.views.fit import fit_rank
from c3.look import shown
from c3.screens.base import CockpitModal, describe_error
from c3.services import NewPod, PodState
from widgets.fit_breakdown import fit_lines, verdict_markup

REFIT_DELAY_S = 0.25


def parse_gpus(text: str) -> tuple[int, ...] | str:
    """`0,1` or `0 1` → (0, 1); a string is the reason it is not a GPU list."""
    items = [p for p in re.split(r"[\s,]+", text.strip()) if p]
    if not items:
        return "choose at least one GPU, e.g. 0,1"
    if not all(p.isdigit() for p in items):
        return "GPUs are host indices, e.g. 0,1"
    values = tuple(int(p) for p in items)
    if len(set(values)) != len(values):
        return "a GPU is listed twice"
    return values


def gpu_list(indices: list[int] | tuple[int, ...]) -> str:
    """`[0, 1, 2, 3]` → `0-3`, `[0, 2, 3]` → `0,2-3`: short enough for one line at 80 columns."""
    parts: list[str] = []
    ordered = sorted(indices)
    start = 0
    for i in range(1, len(ordered) + 1):
        if i == len(ordered) or ordered[i] != ordered[i - 1] + 1:
            first, last = ordered[start], ordered[i - 1]
            parts.append(str(first) if first == last else f"{first},{last}" if last == first + 1 else f"{first}-{last}")
            start = i
    return ",".join(parts) or "none"


def name_problem(name: str, taken: set[str]) -> str | None:
    """Why a pod name is not acceptable (None when it is)."""
    if not name:
        return "give the pod a name"
    # The estate's own rule, imported on first use: by then the facade (built in a worker) has loaded
    # backend.models, so nothing heavy is imported on the event loop.
    from backend.models.names import pod_name_problem

    if problem := pod_name_problem(name):
        return problem
    if name.lower() in taken:
        return f"a pod named `{name}` already exists"
    return None


class NewPodModal(CockpitModal):
    """Collects a `NewPod`; does not write anything itself."""

    # Focus by AUTO_FOCUS, not focus() in on_mount: a deferred focus() would snatch focus back from
    # a fast typist's Tab (seen in tmux).
    AUTO_FOCUS = "#name"
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]
    """At 24 rows the slug list shrinks so the fit breakdown and the buttons stay on screen."""
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="new_pod_cancel"),
        Binding("ctrl+s", "create", "Create", id="new_pod_create", priority=True),
        Binding("down", "into_slugs", "Into the slug list", show=False),
    ]

    def __init__(self, gpu_indices: list[int], pods: list[PodState], initial: NewPod | None = None, problem: str | None = None,
                 editing: str | None = None) -> None:
        """`initial`: the values of a request that was refused, to fix rather than retype; `problem`: why.
        `editing`: the pod this form edits (`e`), prefilled; its own name, GPUs and port are not taken."""
        super().__init__()
        self.editing = editing
        own = next((p for p in pods if p.name == editing), None) if editing else None
        self.own_port = own.port if own is not None else None
        if own is not None:
            pods = [p for p in pods if p is not own]
            initial = initial or NewPod(name=own.name, slug=own.slug, gpus=own.gpus, port=own.port)
        self.gpu_indices = sorted(gpu_indices)
        self.pods = pods
        self.initial = initial
        self.first_problem = problem
        self.taken_names = {p.name.lower() for p in pods}
        self.taken_ports = {p.port: p.name for p in pods}
        claimed = {i for p in pods for i in p.gpus}
        self.free = [i for i in self.gpu_indices if i not in claimed]
        self.entries: dict[str, CatalogEntry] = {}
        self.verdicts: dict[str, str] = {}
        self.kv_left: dict[str, float | None] = {}
        """KV GiB per rank each slug leaves on its GPUs (what the list ranks by, with the verdict)."""
        self.verdict_gpus: dict[str, tuple[int, ...]] = {}
        """The GPUs each slug's verdict was computed on (shown on its row, so the list and the fit line agree)."""
        self.slug: str | None = None
        self.report: FitReport | None = None
        self.port_touched = False
        self.slug_picked = False
        self._generation = 0
        self._landed_generation = -1
        """The generation of the fit shown on screen (equal to `_generation` when nothing newer is pending)."""
        self._port_pending = False
        self._proposed_port = ""
        self._port_checking: str | None = None
        """The port text whose check (in a worker) has not landed yet."""
        self._verdicts_for: str | None = None
        self._refit_timer: Timer | None = None
        self._said: str | None = None

    def compose(self) -> ComposeResult:
        free = gpu_list(self.free)
        with Vertical(id="dialog", classes="new-pod"):
            if self.editing:
                yield Static(Content.from_markup("[b]Edit pod $n[/]  [$text-muted]Tab moves · ↑↓ pick a slug · Ctrl+S save · Esc cancel[/]", n=self.editing))
            else:
                yield Static("[b]New pod[/]  [$text-muted]Tab moves · ↑↓ pick a slug · Ctrl+S create · Esc cancel[/]")
            with Horizontal(classes="row", id="name-row"):
                yield Static("Name", classes="label")
                yield Input(placeholder="e.g. chat", id="name", compact=True)
                yield Static("", id="name-check", classes="check")
            with Horizontal(classes="row"):
                yield Static("Slug", classes="label")
                yield Input(placeholder="type to filter slugs", id="filter", compact=True)
                yield Static("[$text-muted]ranked by KV left, on the GPUs shown[/]", classes="check")
            yield OptionList(id="slugs", compact=True)
            with Horizontal(classes="row"):
                yield Static("GPUs", classes="label")
                yield Input(id="gpus", compact=True)
                yield Static("Port", classes="label port-label")
                yield Input(id="port", restrict=r"[0-9]*", max_length=5, compact=True)
                yield Static(Content.from_markup("[$text-muted]free: $f[/]", f=free), id="gpus-check", classes="check")
            yield Static("", id="form-problem")
            yield Static(fit_lines(None), id="fit")
            with Horizontal(classes="buttons"):
                yield Button("Cancel  Esc", id="cancel", compact=True)
                yield Button("Save  Ctrl+S" if self.editing else "Create  Ctrl+S", id="create", variant="primary", compact=True)

    def on_mount(self) -> None:
        self.query_one("#slugs", OptionList).add_option(Option("[dim]loading the catalog…[/]", id="", disabled=True))
        if self.initial is not None:
            # A refused request comes back as it was typed: fix what was wrong, keep the rest.
            self._proposed_port = str(self.initial.port)
            self.query_one("#name", Input).value = self.initial.name
            self.query_one("#gpus", Input).value = ",".join(map(str, self.initial.gpus))
            self.query_one("#port", Input).value = str(self.initial.port)
            self.port_touched = True
            self.slug, self.slug_picked = self.initial.slug, True
        if self.editing:
            self.query_one("#name", Input).disabled = True
        self.call(self.services.catalog, done=self._catalog_landed, failed=self._catalog_failed, group="catalog")
        self._check_name()
        self._say(self.first_problem)

    def _say(self, problem: str | None, kind: str = "form") -> None:
        """The form's own message line (not a toast: a toast would cover the form at 80×24). `kind`:
        what said it, so the port check clears only its own message, never a refusal's."""
        self._said = kind if problem else None
        line = self.query_one("#form-problem", Static)
        line.display = bool(problem)
        line.update(Content.from_markup("[$error]✗ $p[/]", p=problem) if problem else "")

    # -- catalog and verdicts ----------------------------------------------------------------------
    def _catalog_landed(self, entries: list[CatalogEntry]) -> None:
        self.entries = {e.slug: e for e in entries if e.status != "deprecated"}
        self._render_slugs()
        self._refresh_verdicts()
        if self.initial is not None:
            self._schedule_refit(verdicts=False)

    def _catalog_failed(self, error: BaseException) -> None:
        slugs = self.query_one("#slugs", OptionList)
        slugs.clear_options()
        slugs.add_option(Option(Content.from_markup("[$error]✗ $e[/]", e=describe_error(error)), id="", disabled=True))

    def gpus_for(self, entry: CatalogEntry) -> tuple[int, ...]:
        """The chosen GPUs when their count matches the slug, else free GPUs sized to its TP × PP —
        only free ones: fewer than it needs when not enough are free (never a claimed GPU)."""
        chosen = parse_gpus(self.query_one("#gpus", Input).value)
        if isinstance(chosen, tuple) and len(chosen) == entry.gpu_count:
            return chosen
        return tuple(self.free[: entry.gpu_count])

    def _refresh_verdicts(self) -> None:
        gpus_text = self.query_one("#gpus", Input).value
        targets = [(slug, self.gpus_for(entry)) for slug, entry in self.entries.items()]

        def work() -> dict[str, tuple[str, float | None]]:
            out: dict[str, tuple[str, float | None]] = {}
            for slug, gpus in targets:
                if self._verdicts_for != gpus_text:
                    break  # the GPU set changed: a newer pass is coming
                if len(gpus) < self.entries[slug].gpu_count:
                    out[slug] = ("too-few", None)  # not "fits on GPUs someone else holds"
                    continue
                try:
                    report = self.services.fit(slug, gpus)
                    out[slug] = (report.verdict, report.available_kv_gib)
                except Exception:  # noqa: BLE001 - one bad entry must not hide the others
                    out[slug] = ("unknown", None)
            return out

        self._verdicts_for = gpus_text
        on = dict(targets)
        self.call(work, done=lambda v: self._verdicts_landed(v, gpus_text, on), group="verdicts")

    def _verdicts_landed(self, priced: dict[str, tuple[str, float | None]], gpus_text: str, on: dict[str, tuple[int, ...]]) -> None:
        # Verdicts depend only on the GPU field: keep them unless it changed meanwhile.
        if gpus_text != self.query_one("#gpus", Input).value or len(priced) < len(self.entries):
            return
        self.verdicts = {slug: verdict for slug, (verdict, _) in priced.items()}
        self.kv_left = {slug: kv for slug, (_, kv) in priced.items()}
        self.verdict_gpus = on
        self._render_slugs()

    def _render_slugs(self) -> None:
        needle = self.query_one("#filter", Input).value.strip().lower()
        slugs = self.query_one("#slugs", OptionList)
        listed = [e for e in self.entries.values() if needle in e.slug.lower() or needle in e.model.lower()]
        listed.sort(key=lambda e: (*fit_rank(self.verdicts.get(e.slug, "unknown"), self.kv_left.get(e.slug)), e.slug))
        keep = self.slug
        slugs.clear_options()
        if not listed:
            slugs.add_option(Option("[dim]no slug matches the filter[/]", id="", disabled=True))
            return
        for entry in listed:
            verdict = self.verdicts.get(entry.slug)
            on = self.verdict_gpus.get(entry.slug, ())
            if verdict == "too-few":
                mark = f"[$text-muted]✗ {len(self.free)} of {entry.gpu_count} free[/]"
                where = f"needs {entry.gpu_count} GPUs"
            else:
                mark = verdict_markup(verdict) if verdict else "[$text-muted]…[/]"
                kv = self.kv_left.get(entry.slug)
                if verdict in ("fits", "tight") and kv is not None:
                    mark += f" {kv:.1f} GiB"  # the KV memory left: what the list ranks by (in the mark's column: no row wraps at 80×24)
                where = f"on GPU{'s' if len(on) > 1 else ''} {gpu_list(on)}" if on else f"{entry.gpu_count} GPU"
            pad = " " * max(1, 18 - len(Content.from_markup(mark).plain))
            prompt = Content.from_markup(f"{mark}{pad}$s [$text-muted]· $w[/]", s=shown(entry.slug), w=where)
            slugs.add_option(Option(prompt, id=entry.slug))
        ids = [e.slug for e in listed]
        typed = [i.lower() for i in ids]
        # Until the user picks a slug, a slug typed in full, else the best-ranked one, is the proposal.
        slugs.highlighted = ids.index(keep) if keep in ids and self.slug_picked else typed.index(needle) if needle in typed else 0

    # -- events ----------------------------------------------------------------------------------
    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        slug = event.option.id
        if event.option_list.has_focus:
            self.slug_picked = True
        if not slug or slug == self.slug:
            return
        self.slug = slug
        entry = self.entries[slug]
        gpus_input = self.query_one("#gpus", Input)
        chosen = parse_gpus(gpus_input.value)
        if not isinstance(chosen, tuple) or len(chosen) != entry.gpu_count:
            gpus_input.value = ",".join(map(str, self.gpus_for(entry)))
        if not self.port_touched:
            self._port_pending = True
            self.call(self.services.propose_port, slug, done=self._port_landed, group="port", exclusive=True)
        self._schedule_refit(verdicts=False)

    def _port_landed(self, port: int) -> None:
        self._port_pending = False
        if not self.port_touched:
            self._proposed_port = str(port)
            self.query_one("#port", Input).value = str(port)

    def action_into_slugs(self) -> None:
        """↓ in the filter field goes into the slug list (its highlight where it was: the proposal),
        as the header's "↑↓ pick a slug" says; the list's own ↓ then moves down it."""
        focused = self.focused
        if focused is None or focused.id != "filter":
            return
        slugs = self.query_one("#slugs", OptionList)
        slugs.focus()
        if slugs.highlighted is None and slugs.option_count:
            slugs.action_first()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.query_one("#gpus", Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "name":
            self._check_name()
        elif event.input.id == "filter":
            self._render_slugs()
        elif event.input.id == "port":
            # Our own proposal arrives as a Changed event too; only a different value is the user's.
            self.port_touched = event.value != self._proposed_port
            self._check_port(event.value.strip())
        elif event.input.id == "gpus":
            self._schedule_refit(verdicts=True)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.focus_next()

    def _check_name(self) -> str | None:
        if self.editing:
            self.query_one("#name-check", Static).update(Content.from_markup("[$text-muted]the pod being edited[/]"))
            return None
        problem = name_problem(self.query_one("#name", Input).value.strip(), self.taken_names)
        check = self.query_one("#name-check", Static)
        if problem:
            check.update(Content.from_markup("[$warning]✗ $p[/]", p=problem))
        else:
            check.update(Content.from_markup("[$success]✓ name is free[/]"))
        return problem

    def _schedule_refit(self, *, verdicts: bool) -> None:
        self._generation += 1
        if self._refit_timer is not None:
            self._refit_timer.stop()
        self._refit_timer = self.set_timer(REFIT_DELAY_S, lambda: self._refit(verdicts))

    def _check_port(self, text: str) -> None:
        """Check the port as typed, in a worker: the facade binds to see whether something listens on
        it, and a bind has no place on the event loop (it ran there on every keystroke)."""
        self._port_checking = text
        if not text or (self.own_port is not None and text == str(self.own_port)):  # its own port: bound while it runs
            self._port_checked(text, None)
            return
        self.call(self.services.port_problem, text, dict(self.taken_ports), done=lambda problem: self._port_checked(text, problem),
                  failed=lambda error: self._port_checked(text, f"port: cannot check it ({describe_error(error)})"), group="port-check")

    def _port_checked(self, text: str, problem: str | None) -> None:
        if text != self._port_checking:
            return  # typed on since: a newer check is on its way
        self._port_checking = None
        if problem or self._said == "port":
            self._say(problem, "port")

    def _refit(self, verdicts: bool) -> None:
        generation = self._generation
        gpus = parse_gpus(self.query_one("#gpus", Input).value)
        check = self.query_one("#gpus-check", Static)
        free = gpu_list(self.free)
        if isinstance(gpus, str):
            check.update(Content.from_markup("[$warning]✗ $p[/] [$text-muted]· free: $f[/]", p=gpus, f=free))
            # No GPUs, no fit: the last verdict must not stay on screen as if it were for this field.
            self._generation += 1
            self.report = None
            self.query_one("#fit", Static).update(Content.from_markup("[$text-muted]fit: choose GPUs first (free: $f)[/]", f=free))
            if self.entries and self.query_one("#gpus", Input).value != self._verdicts_for:
                self._refresh_verdicts()
            return
        unknown = [i for i in gpus if i not in self.gpu_indices]
        claimed = [i for i in gpus if i not in self.free and i in self.gpu_indices]
        if unknown:
            check.update(Content.from_markup("[$warning]✗ no GPU $u on this rig[/]", u=",".join(map(str, unknown))))
        elif claimed:
            check.update(Content.from_markup("[$warning]⚠ GPU $c already claimed[/] [$text-muted]· free: $f[/]", c=",".join(map(str, claimed)), f=free))
        else:
            check.update(Content.from_markup("[$text-muted]free: $f[/]", f=free))
        if self.slug:
            self.query_one("#fit", Static).update(Content.from_markup("[$text-muted]fit: checking…[/]"))
            self.call(self.services.fit, self.slug, gpus, done=lambda r: self._fit_landed(r, generation), failed=lambda e: self._fit_failed(e, generation), group="fit")
        if self.entries and self.query_one("#gpus", Input).value != self._verdicts_for:
            self._refresh_verdicts()

    def _fit_landed(self, report: FitReport, generation: int) -> None:
        if generation == self._generation:
            self.report = report
            self._landed_generation = generation
            self.query_one("#fit", Static).update(fit_lines(report))

    def _fit_failed(self, error: BaseException, generation: int) -> None:
        if generation == self._generation:
            self._landed_generation = generation
            self.query_one("#fit", Static).update(Content.from_markup("[$error]✗ $e[/]", e=describe_error(error)))

    @property
    def settled(self) -> bool:
        """Nothing is still on its way: the verdicts are for the GPU field as it reads, the fit line is
        for the highlighted slug with no refit pending, and the proposed port and its check have landed. (Tests and
        the screenshot script wait on this; a half-updated form is what a user sees only briefly.)"""
        gpus = self.query_one("#gpus", Input).value
        return (
            bool(self.entries)
            and len(self.verdicts) >= len(self.entries)
            and self._verdicts_for == gpus
            and (self.slug is None or self._landed_generation == self._generation)
            and not self._port_pending
            and self._port_checking is None
        )

    # -- result ----------------------------------------------------------------------------------
    def collect(self) -> NewPod | str:
        """The request, or why it cannot be made yet."""
        name = self.query_one("#name", Input).value.strip()
        problem = name_problem(name, self.taken_names)
        if problem:
            return f"name: {problem}"
        if not self.slug:
            return "choose a slug"
        gpus = parse_gpus(self.query_one("#gpus", Input).value)
        if isinstance(gpus, str):
            return f"GPUs: {gpus}"
        port_text = self.query_one("#port", Input).value.strip()
        # The estate's rule without the host check (that binds: the worker above said it, and the plan
        # re-checks it); imported on first use, as `name_problem` does.
        from backend.views.estate_file import port_problem

        if problem := port_problem(port_text, self.taken_ports, on_host=False):
            return problem
        return NewPod(name=name, slug=self.slug, gpus=gpus, port=int(port_text))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "create":
            self.action_create()
        else:
            self.action_cancel()

    def action_create(self) -> None:
        request = self.collect()
        if isinstance(request, str):
            self._say(request)
            return
        self.dismiss(request)

    def action_cancel(self) -> None:
        self.dismiss(None)


class EditPodModal(NewPodModal):
    """The same form editing pod `editing` in place (`e`, `c3 pod edit`): prefilled, its name fixed."""

    AUTO_FOCUS = "#filter"  # the name is not edited

    def __init__(self, gpu_indices: list[int], pods: list[PodState], editing: str, initial: NewPod | None = None, problem: str | None = None) -> None:
        super().__init__(gpu_indices, pods, initial, problem, editing=editing)
