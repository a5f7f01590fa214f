"""`p` GPU processes: every compute process on the GPUs — pid, GPU it really uses, memory, its pod
(or none: foreign, highlighted), user and command. A pod's process on a GPU the pod did not ask for is
listed on the GPU it really uses and marked misplaced. Filter (`/`) and sort (`s`, `S`) as every list.
It reads again when the live hub pushes a change of the GPUs' process lists or of the pods, and polls
every PERIOD_S only when nothing is pushed.

`T` `K` `I` `H` send SIGTERM, SIGKILL, SIGINT or SIGHUP to the highlighted process (nvitop's keys, in capitals:
`k` moves up in every list),
always through the confirm gate, which shows pid, command, GPU, memory and its pod or `foreign`; a
foreign process is confirmed only with the gate's own key (`f`), never `y`. The result is said here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Static

from c3.look import shown
from c3.screens.base import LiveModal, describe_error
from widgets.list_query import FILTER_BINDINGS, Filterable, FilterBar, ListQuery, QueryLine
from widgets.nav_table import NavTable

if TYPE_CHECKING:
    from backend.runtime.gpu_processes import GpuProcessRow
    from c3.services import WriteResult

PERIOD_S = 2.0


def holder(row: GpuProcessRow) -> Content:
    """The pod column: the pod, `⚠ pod (plans GPU1)` when misplaced, `foreign` when no pod's."""
    if row.foreign:
        return Content.from_markup("[$warning b]⚠ foreign[/]")
    if row.misplaced:
        plan = ",".join(map(str, row.planned_gpus or ()))
        return Content.from_markup("[$error b]⚠ $p[/] [$error](plans GPU$g)[/]", p=row.pod or "", g=plan)
    return Content(row.pod or "")


def short_command(command: str | None) -> str:
    """The command line with its program's directory dropped (`/usr/bin/python3 -m x` → `python3 -m x`)."""
    if command is None:
        return "(gone, or not visible from this host)"
    program, _, rest = command.partition(" ")
    return (program.rsplit("/", 1)[-1] + (" " + rest if rest else "")) or command


def process_text(row: GpuProcessRow) -> str:
    """What `/` matches: every column as shown, plus the flags' words."""
    flags = "foreign" if row.foreign else ("misplaced" if row.misplaced else "")
    return f"{row.pid} GPU{row.gpu_index} {row.pod or ''} {flags} {row.user or ''} {row.command or ''}"


class ProcessesModal(Filterable, LiveModal):
    """A table of GPU processes, re-read every 2 s in a worker."""

    DEFAULT_CSS = """
    #dialog.processes { height: auto; max-height: 90%; max-width: 150; }
    #dialog.processes NavTable { height: auto; max-height: 30; }
    """
    BINDINGS: ClassVar[list[Binding | tuple[str, str] | tuple[str, str, str]]] = [
        Binding("q,p", "close", "Close", id="processes_close"),
        Binding("T", "signal('TERM')", "SIGTERM", id="processes_term"),
        Binding("K", "signal('KILL')", "SIGKILL", id="processes_kill"),
        Binding("I", "signal('INT')", "SIGINT", id="processes_int"),
        Binding("H", "signal('HUP')", "SIGHUP", id="processes_hup"),
        *FILTER_BINDINGS,
    ]
    SORTS = (
        ("GPU", lambda r: (r.gpu_index, r.pid)),
        ("memory", lambda r: -(r.used_mib or 0)),
        ("pod", lambda r: (r.pod is not None, r.pod or "", r.gpu_index)),
        ("pid", lambda r: r.pid),
    )

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[GpuProcessRow] | None = None
        self.shown: list[GpuProcessRow] = []
        self.error: str | None = None
        self.in_flight = False
        self.again = False
        """A push arrived while a read was in flight: read once more when it lands."""
        self.reads = 0
        self.result: WriteResult | None = None
        """The last signal's result, said in the head until the next one."""
        self._gpu_procs: tuple[tuple[int, str, int | None], ...] | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="processes"):
            yield Static("", id="processes-head")
            yield NavTable(id="processes", cursor_type="row", zebra_stripes=True)
            yield QueryLine(id="query-line")
            yield Static("", id="processes-hint")
            yield FilterBar(placeholder="filter: text or regex · Enter keeps · Esc clears", id="filter-bar")

    def on_mount(self) -> None:
        table = self.query_one("#processes", NavTable)
        for name, width in zip(("GPU", "pid", "MiB", "pod", "user"), self.widths(), strict=False):
            table.add_column(name, width=width)
        table.add_column("command")
        self.render_rows()
        self.poll()
        if self.polls:  # pushed: read again when the hub says GPU processes or pods changed (live_changed)
            self.set_interval(PERIOD_S, self.poll, name="processes")
        table.focus()

    def live_changed(self, *, gpus: Any = None, pods: Any = None) -> None:
        if gpus is not None:
            procs = tuple((p.pid, p.gpu_uuid, p.used_mib) for s in gpus.snapshots for p in s.processes)
            if procs == self._gpu_procs:
                return  # utilisation, power, sparklines: nothing this lists
            self._gpu_procs = procs
        self.poll()

    def widths(self) -> tuple[int, ...]:
        """GPU, pid, MiB, pod, user, command: the command gets what is left, so nothing scrolls sideways."""
        inner = min(int(self.app.size.width * 0.9), 150) - 4  # the dialog's border and padding
        fixed = (3, 7, 6, 24, 8) if inner >= 100 else (3, 6, 6, 20, 5)
        return (*fixed, max(10, inner - sum(fixed) - 2 * 6 - 2))  # cell padding, the scrollbar

    def list_widget(self) -> NavTable:
        return self.query_one("#processes", NavTable)

    def poll(self) -> None:
        if self.in_flight:
            self.again = True
            return
        self.in_flight, self.again = True, False
        self.call(self.services.gpu_processes, done=self._landed, failed=self._failed, group="processes")

    def _landed(self, rows: list[GpuProcessRow]) -> None:
        self.in_flight = False
        self.reads += 1
        self.rows, self.error = rows, None
        self.render_rows()
        if self.again:
            self.poll()

    def _failed(self, error: BaseException) -> None:
        self.in_flight = False
        self.error = describe_error(error)
        self.render_rows()
        if self.again:
            self.poll()

    def query_changed(self) -> None:
        self.render_rows()

    def render_rows(self) -> None:
        rows = self.rows or []
        foreign = sum(1 for r in rows if r.foreign)
        misplaced = sum(1 for r in rows if r.misplaced)
        head = [Content.from_markup("[b]GPU processes[/]  $n on the GPUs", n=str(len(rows)))]
        if foreign:
            head.append(Content.from_markup("[$warning b]$f foreign[/] [$text-muted](no c3 pod's)[/]", f=str(foreign)))
        if misplaced:
            head.append(Content.from_markup("[$error b]$m misplaced[/] [$text-muted](on a GPU its pod did not ask for)[/]", m=str(misplaced)))
        if self.rows is None and self.error is None:
            head.append(Content.from_markup("[$text-muted]reading…[/]"))
        if self.error:
            head.append(Content.from_markup("[$error]✗ $e[/]", e=shown(self.error)))
        if self.result is not None:
            mark = "[$success]✓" if self.result.ok else "[$error]✗"
            head.append(Content.from_markup(f"{mark} $m[/]", m=shown(self.result.message)))
        self.query_one("#processes-head", Static).update(Content(" · ").join(head))
        self.shown = self.filtered(rows, process_text)
        table = self.query_one("#processes", NavTable)
        cursor = table.cursor_row
        table.clear()
        room = self.widths()[-1]
        for r in self.shown:
            command = short_command(r.command)
            if len(command) > room:
                command = command[: room - 1] + "…"
            table.add_row(str(r.gpu_index), str(r.pid), "?" if r.used_mib is None else str(r.used_mib), holder(r), r.user or "?", command,
                          key=f"{r.gpu_index}/{r.pid}")
        if self.shown:
            table.move_cursor(row=min(max(cursor, 0), len(self.shown) - 1))
        empty = "no compute process on any GPU · " if self.rows is not None and not rows else ""
        hint = self.query_one("#processes-hint", Static)
        hint.display = self.list_query == ListQuery()
        hint.update(Content.from_markup("[$text-muted]$e/ filters · s sorts · S reverses · T K I H signal · Esc closes[/]", e=empty))

    def action_signal(self, name: str) -> None:
        """Plan a signal to the highlighted process: the gate shows it, the user confirms (or not)."""
        from c3.services import ProcessSignal

        table = self.query_one("#processes", NavTable)
        if not self.shown or not 0 <= table.cursor_row < len(self.shown):
            self.app.bell()
            return
        row = self.shown[table.cursor_row]
        # foreign=True: the gate, not a flag, is the explicit choice here — a foreign process's plan
        # confirms only with its own key (Plan.confirm), which `y` never presses.
        self.cockpit.request_write("signal", pod=f"pid {row.pid}", request=ProcessSignal(row.pid, name, foreign=True))

    def write_result(self, result: WriteResult) -> None:
        """A write's result (the signal's), said in the head; the list reads again."""
        self.result = result
        self.render_rows()
        self.poll()

    def action_close(self) -> None:
        self.dismiss(None)
