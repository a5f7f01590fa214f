"""Nodes mode: the node registry with live reachability, endpoint health and GPUs; a running pool with
per-backend health and counters; add (`a`) and remove (`x`) nodes, and drain or undrain (`D`) the highlighted
node in the running pool, through the confirm gate. The highlighted node's model cache (what `c3 cache ls`
reads: models on disk and their size) is in the side pane, read in a worker every minute. Below the pool, a
shard this machine's `c3 shard start` runs: one line per rank (c3/screens/shards.py), read every second;
`d` stops it (`c3 shard stop TAG`) through the confirm gate."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.content import Content
from textual.widgets import DataTable, Static

from backend.errors import terminal_safe
from c3.look import shown
from c3.screens.base import CockpitScreen, describe_error
from c3.screens.chrome import gib, mode_bar, result_line
from c3.screens.shards import SHARDS_PERIOD_S, rank_cells, shard_heads
from c3.services import NewNode, NodeRow, PoolRouter, PoolRow, ShardStop, WriteResult

if TYPE_CHECKING:
    from backend.views.cache import NodeCache
    from backend.views.shard import LiveShard
from widgets.key_bar import KeyBar
from widgets.list_query import FILTER_BINDINGS, Filterable, FilterBar, QueryLine
from widgets.nav_table import NavTable, SafeTable
from widgets.source_badge import source_badge

NODES_PERIOD_S = 10.0
POOLS_PERIOD_S = 2.0
CACHE_PERIOD_S = 60.0
"""Model caches change when a download ends: a bounded scan a minute is plenty."""
CACHE_LINES = 5
"""Models listed per node in the side pane (largest first; `c3 cache ls --node N` has them all)."""
COMPACT_BELOW = 110
"""Terminal widths under this get the compact table (name, reach, endpoint without its scheme): the
SSH target and the GPUs are in the side pane, so nothing is lost and nothing scrolls sideways."""

EMPTY = (
    "No nodes registered yet.\n\n"
    "A node is a machine c3 can reach: its OpenAI endpoint and its SSH target. Press [b]a[/] to add one\n"
    "([b]Ctrl+T[/] in the form fills in this machine), or from a shell\n\n"
    "  [b]c3 node add NAME --host URL --ssh USER@HOST[/]\n"
    "  [$text-muted]e.g. c3 node add spark-2 --host http://10.0.0.12:8000 --ssh ubuntu@10.0.0.12[/]\n\n"
    "Register this machine too (it is recognised and driven without SSH)."
)
NO_POOL = (
    "[b]Pool[/]  [$text-muted]no router running on this machine. Spread requests over nodes serving the same model:[/]\n"
    "  [b]c3 pool serve --nodes a,b --bind :8011[/]  [$text-muted](sticky per session or API key; `c3 pool status` from a shell)[/]"
)


class DetailPane(Static):
    """The side pane. Its lines are cut to its width, which is known only once it is laid out: a resize
    (the first layout included) redraws them, so what it shows never depends on whether the data or the
    layout came first."""

    def on_resize(self, event: events.Resize) -> None:
        screen = self.screen
        if isinstance(screen, NodesScreen):
            screen.show_detail(screen.highlighted())


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}"


def gpu_summary(row: NodeRow) -> Content:
    """`4 GPUs 47.2/104 GiB` for the table, or why there is no GPU list."""
    if not row.gpus:
        if row.reachable is None:
            return Content.from_markup("[$text-muted]…[/]")
        return Content.from_markup("[$text-muted]$e[/]", e=shown(row.gpu_error or "no GPUs"))
    used = sum(g.used_mib or 0 for g in row.gpus)
    total = sum(g.total_mib or 0 for g in row.gpus)
    return Content(f"{len(row.gpus)} GPU{'s' if len(row.gpus) != 1 else ''} {gib(used)}/{gib(total)} GiB")


def node_text(row: NodeRow) -> str:
    """What `/` matches: name, where, SSH target, endpoint, GPU names, why unreachable."""
    where = "local" if row.local else ("reachable" if row.reachable else "unreachable" if row.reachable is False else "")
    return f"{row.name} {where} {row.ssh} {row.host} {row.detail} {' '.join(g.name for g in row.gpus)}"


class NodesScreen(Filterable, CockpitScreen):
    """Registry table, the highlighted node's GPUs beside it, running pools below; polled while shown."""

    WRITES = frozenset({"node_add", "node_rm", "pool_drain", "shard_stop"})
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "add_node", "Add node", id="node_add", tooltip="Register a node: name, endpoint URL, SSH target, key"),
        Binding("x", "remove_node", "Remove", id="node_rm", tooltip="Unregister the highlighted node (nothing on it is touched)"),
        Binding("D", "drain_node", "Drain", id="pool_drain",
                tooltip="Take the highlighted node out of the running pool's new sessions (its pinned ones move once idle), or back in"),
        Binding("d", "stop_shard", "Stop shard", id="shard_stop",
                tooltip="Stop the live shard shown below on every node it spans (c3 shard stop TAG; other shards keep running)"),
        Binding("r", "refresh_now", "Refresh", id="nodes_refresh", tooltip="Read the registry, probe the nodes and the pools now"),
        *FILTER_BINDINGS,
    ]
    SORTS = (
        ("name", lambda r: r.name),
        ("reach", lambda r: (not r.local, r.reachable is not True, r.name)),
        ("GPUs", lambda r: (-len(r.gpus), r.name)),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rows: list[NodeRow] | None = None
        self.pools: list[PoolRow] | None = None
        self.taken_at: datetime | None = None
        self.pools_at: datetime | None = None
        self.error: str | None = None
        self.pools_error: str | None = None
        self.result: WriteResult | None = None
        self.compact: bool | None = None
        """The table's column set in use (None before the first layout)."""
        self.shown: list[NodeRow] = []
        """The rows the table shows, in its order (filtered and sorted)."""
        self.poller = self.add_poller(NODES_PERIOD_S, self._poll)
        self.pool_poller = self.add_poller(POOLS_PERIOD_S, self._poll_pools)
        self.caches: dict[str, NodeCache] | None = None
        """Each registered node's model cache by name (None before the first reading)."""
        self.cache_error: str | None = None
        self.cache_poller = self.add_poller(CACHE_PERIOD_S, self._poll_caches)
        self.shards: list[LiveShard] | None = None
        self.shards_at: datetime | None = None
        self.shards_error: str | None = None
        self.shard_poller = self.add_poller(SHARDS_PERIOD_S, self._poll_shards)
        self.stoppable = False
        """A live shard is shown (the key bar has `d`)."""

    def compose(self) -> ComposeResult:
        yield Static(id="modebar")
        yield Static(id="sources")
        yield Static("", id="nodes-result")
        yield Static("", id="nodes-empty", classes="empty")
        with Horizontal(id="nodes-pane"):
            yield NavTable(id="nodes", cursor_type="row", zebra_stripes=True)
            yield DetailPane("", id="node-detail")
        yield QueryLine(id="query-line")
        yield FilterBar(placeholder="filter nodes: text or regex · Enter keeps · Esc clears", id="filter-bar")
        yield Static("", id="pools-title")
        yield SafeTable(id="pool-backends", cursor_type="none", zebra_stripes=True)
        yield Static("", id="shards-title")
        yield SafeTable(id="shard-ranks", cursor_type="none", zebra_stripes=True)
        yield KeyBar()

    def refresh_chrome(self) -> None:
        app = self.cockpit
        label = app.services.label if app.services is not None else "connecting…"
        self.query_one("#modebar", Static).update(mode_bar("nodes", label, app.readonly, app.trouble.summary()))

    def on_mount(self) -> None:
        self.refresh_chrome()
        self._set_columns(self.app.size.width < COMPACT_BELOW)
        backends = self.query_one("#pool-backends", DataTable)
        backends.add_column("backend")
        backends.add_column("health", width=10)
        backends.add_columns("in-flight", "requests", "errors", "p50 ms", "p99 ms")
        backends.add_column("draining", width=8)
        ranks = self.query_one("#shard-ranks", DataTable)
        ranks.add_column("node")
        ranks.add_columns("rank", "pid")
        ranks.add_column("state", width=13)
        ranks.add_column("part")
        self.show_result(self.cockpit.last_result)
        self.render_rows()
        self.render_pools()
        self.render_shards()
        self.add_ticker(1.0, self.render_sources, name="as-of")
        super().on_mount()

    def _set_columns(self, compact: bool) -> None:
        if compact == self.compact:
            return
        self.compact = compact
        nodes = self.query_one("#nodes", DataTable)
        nodes.clear(columns=True)
        # Cells are Content: give their columns widths (auto width only measures plain strings).
        nodes.add_column("name")
        if compact:
            nodes.add_column("reach", width=8)
            nodes.add_column("endpoint", width=22)
            nodes.add_column("GPUs", width=4)
            return
        nodes.add_column("where", width=13)
        nodes.add_column("ssh")
        nodes.add_column("endpoint", width=28)
        nodes.add_column("GPUs", width=20)

    def on_resize(self, event: events.Resize) -> None:
        compact = event.size.width < COMPACT_BELOW
        if compact != self.compact and self.compact is not None:
            self._set_columns(compact)
            self.render_rows()

    # -- polling ---------------------------------------------------------------------------------
    def _poll(self) -> None:
        self.call(self.services.nodes, done=self._landed, failed=self._failed, group="nodes")

    def _landed(self, rows: list[NodeRow]) -> None:
        self.poller.landed()
        self.rows, self.taken_at, self.error = rows, self.cockpit.clock(), None
        self.render_rows()

    def _failed(self, error: BaseException) -> None:
        self.poller.landed()
        self.error = describe_error(error)
        self.render_rows()

    def _poll_pools(self) -> None:
        self.call(self.services.pools, done=self._pools_landed, failed=self._pools_failed, group="pools")

    def _pools_landed(self, pools: list[PoolRow]) -> None:
        self.pool_poller.landed()
        self.pools, self.pools_at, self.pools_error = pools, self.cockpit.clock(), None
        self.render_pools()

    def _pools_failed(self, error: BaseException) -> None:
        self.pool_poller.landed()
        self.pools_error = describe_error(error)
        self.render_pools()

    def _poll_caches(self) -> None:
        self.call(self.services.node_caches, done=self._caches_landed, failed=self._caches_failed, group="caches")

    def _caches_landed(self, caches: list[NodeCache]) -> None:
        self.cache_poller.landed()
        self.caches, self.cache_error = {c.node or "": c for c in caches}, None
        self.show_detail(self.highlighted())

    def _caches_failed(self, error: BaseException) -> None:
        self.cache_poller.landed()
        self.cache_error = describe_error(error)
        self.show_detail(self.highlighted())

    def _poll_shards(self) -> None:
        self.call(self.services.shards, done=self._shards_landed, failed=self._shards_failed, group="shards")

    def _shards_landed(self, shards: list[LiveShard]) -> None:
        self.shard_poller.landed()
        self.shards, self.shards_at, self.shards_error = shards, self.cockpit.clock(), None
        self.render_shards()

    def _shards_failed(self, error: BaseException) -> None:
        self.shard_poller.landed()
        self.shards_error = describe_error(error)
        self.render_shards()

    def action_refresh_now(self) -> None:
        self.poll_now()

    def refresh_badges(self) -> None:
        self.render_sources()

    # -- writes ----------------------------------------------------------------------------------
    def action_add_node(self) -> None:
        from c3.modals.add_node import AddNodeModal

        if self.cockpit.refused_readonly("node_add") or not self.cockpit.ready():
            return
        taken = {r.name for r in self.rows or []}
        self.app.push_screen(AddNodeModal(taken), callback=self._node_chosen)

    def _node_chosen(self, request: NewNode | None) -> None:
        if request is not None:
            self.cockpit.request_write("node_add", request=request)

    def list_widget(self) -> DataTable[Any]:
        return self.query_one("#nodes", DataTable)

    def query_changed(self) -> None:
        self.render_rows()

    def highlighted(self) -> NodeRow | None:
        table = self.query_one("#nodes", DataTable)
        rows = self.shown
        if not rows or not table.display:
            return None
        return rows[min(max(table.cursor_row, 0), len(rows) - 1)]

    def action_remove_node(self) -> None:
        row = self.highlighted()
        if row is None:
            self.app.notify("No node to remove: the registry is empty", timeout=3)
            return
        self.cockpit.request_write("node_rm", pod=row.name)

    def action_drain_node(self) -> None:
        """Drain the highlighted node in the running pool that routes to it, or undrain it if it is draining."""
        row = self.highlighted()
        if row is None:
            self.app.notify("No node to drain: the registry is empty", timeout=3)
            return
        found = [(pool, b) for pool in self.pools or [] if pool.reachable for b in pool.backends if b.node == row.name]
        if not found:
            self.app.notify(f"{row.name} is in no running pool (a pool serves the nodes it was started with)", timeout=4)
            return
        if len(found) > 1:
            binds = ", ".join(pool.bind for pool, _ in found)
            self.app.notify(f"{row.name} is in {len(found)} running pools ({binds}): drain it in one with c3 pool drain {row.name} --port P", timeout=6)
            return
        pool, backend = found[0]
        key = "pool_undrain" if backend.draining else "pool_drain"
        self.cockpit.request_write(key, pod=row.name, request=PoolRouter(port=int(pool.bind.rsplit(":", 1)[-1])))

    def live_shards(self) -> list[LiveShard]:
        """The shards shown that still run (degraded ones too: their parts may)."""
        return [s for s in self.shards or [] if s.headline != "stopped"]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "stop_shard":
            return bool(self.live_shards())  # `d` is in the key bar only while there is a shard to stop
        return super().check_action(action, parameters)

    def action_stop_shard(self) -> None:
        """Stop the one live shard (`c3 shard stop TAG`: its nodes from its record) through the confirm gate."""
        live = self.live_shards()
        if not live:
            self.app.notify("No shard to stop: none that this machine started is running", timeout=3)
            return
        if len(live) > 1:
            each = "; ".join(f"c3 shard stop {s.tag}" for s in live)
            self.app.notify(f"{len(live)} shards run: stop one with {each}", timeout=6)
            return
        self.cockpit.request_write("shard_stop", pod=live[0].tag, request=ShardStop(tag=live[0].tag))

    def show_result(self, result: WriteResult | None) -> None:
        self.result = result
        idle = "a adds a node · x removes one · D drains it in the pool · plan shown first"
        self.query_one("#nodes-result", Static).update(result_line(result, idle))

    # -- rendering -------------------------------------------------------------------------------
    def render_sources(self) -> None:
        now = self.cockpit.clock()
        nodes = source_badge("Nodes", self.taken_at, now, stale_after_s=NODES_PERIOD_S * 3, error=self.error, paused=not self.is_active)
        pools = source_badge("Pools", self.pools_at, now, stale_after_s=POOLS_PERIOD_S * 5, error=self.pools_error, paused=not self.is_active)
        badges = [nodes, pools]
        if self.shards or self.shards_error:  # no badge on a rig that runs no shard
            badges.append(source_badge("Shards", self.shards_at, now, stale_after_s=SHARDS_PERIOD_S * 5, error=self.shards_error,
                                       paused=not self.is_active))
        self.query_one("#sources", Static).update(Content("   ").join(badges))

    def render_rows(self) -> None:
        self.render_sources()
        table = self.query_one("#nodes", DataTable)
        empty = self.query_one("#nodes-empty", Static)
        rows = self.shown = self.filtered(self.rows or [], node_text)
        empty.display = self.rows is not None and not rows
        self.query_one("#nodes-pane").display = bool(rows)
        empty.update(EMPTY if not self.rows else Content.from_markup("[$text-muted]no node matches — Esc shows every node[/]"))
        cursor = table.cursor_row
        table.clear()
        for row in rows:
            table.add_row(*(self._compact_cells(row) if self.compact else self._cells(row)), key=row.name)
        if rows:
            table.move_cursor(row=min(max(cursor, 0), len(rows) - 1))
            self.show_detail(self.highlighted())

    @staticmethod
    def _cells(row: NodeRow) -> tuple[object, ...]:
        if row.reachable is None:
            reach = Content.from_markup("[$text-muted]? not probed[/]")
        elif row.local:
            reach = Content.from_markup("[$success]● local[/]")
        elif row.reachable:
            reach = Content.from_markup("[$success]● ssh ok[/]")
        else:
            reach = Content.from_markup("[$error]✗ unreachable[/]")
        return row.name, reach, row.ssh, _endpoint(row, row.host), gpu_summary(row)

    @staticmethod
    def _compact_cells(row: NodeRow) -> tuple[object, ...]:
        if row.reachable is None:
            reach = Content.from_markup("[$text-muted]?[/]")
        elif row.local:
            reach = Content.from_markup("[$success]● local[/]")
        elif row.reachable:
            reach = Content.from_markup("[$success]● ssh[/]")
        else:
            reach = Content.from_markup("[$error]✗ down[/]")
        gpus = Content(str(len(row.gpus))) if row.gpus else Content.from_markup("[$text-muted]—[/]")
        return row.name, reach, _endpoint(row, row.host.removeprefix("http://").rstrip("/")), gpus

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "nodes":
            self.show_detail(self.highlighted())

    def show_detail(self, row: NodeRow | None) -> None:
        if row is None:
            return
        lines = [Content.from_markup("[b]$n[/]  [$text-muted]$w[/]", n=row.name, w="this machine" if row.local else shown(row.ssh))]
        if row.reachable is False:
            lines.append(Content.from_markup("[$error]✗ ssh[/] $d", d=shown(row.detail)))
        endpoint = "answers" if row.endpoint_ok else ("not probed" if row.endpoint_ok is None else "does not answer")
        lines.append(Content.from_markup("[$text-muted]endpoint[/] $e\n $h", h=shown(row.host), e=endpoint))
        if row.endpoint_detail and not row.endpoint_ok:
            lines.append(Content.from_markup("  [$text-muted]$d[/]", d=shown(row.endpoint_detail)))
        if row.ssh_key:
            lines.append(Content.from_markup("[$text-muted]ssh key[/] $k", k=shown(row.ssh_key)))
        if row.gpus:
            lines.append(Content.from_markup("[$text-muted]GPUs[/]"))
            for gpu in row.gpus:
                name = shown(gpu.name.replace("NVIDIA ", "").replace("GeForce ", ""))
                lines.append(Content(f" {gpu.index} {name:<9}{gib(gpu.used_mib):>5}/{gib(gpu.total_mib)}G"))
        elif row.gpu_error:
            lines.append(Content.from_markup("[$text-muted]GPUs[/] $e", e=shown(row.gpu_error)))
        width = self.query_one("#node-detail", Static).content_size.width
        lines.extend(cache_lines(None if self.caches is None else self.caches.get(row.name), self.cache_error, self.caches is None, width))
        self.query_one("#node-detail", Static).update(Content("\n").join(lines))

    def render_pools(self) -> None:
        self.render_sources()
        title = self.query_one("#pools-title", Static)
        table = self.query_one("#pool-backends", DataTable)
        pools = self.pools or []
        table.display = any(p.backends for p in pools)
        table.clear()
        if self.pools is None:
            title.update(Content.from_markup("[b]Pool[/]  [$text-muted]… reading[/]"))
            return
        if not pools:
            title.update(Content.from_markup(NO_POOL))
            return
        heads = []
        for pool in pools:
            if not pool.reachable:
                heads.append(Content.from_markup("[b]Pool $b[/]  [$error]✗ admin endpoint does not answer[/] [$text-muted]$e[/]", b=shown(pool.bind), e=shown(pool.error or "")))
                continue
            hit = "—" if pool.hit_ratio is None else f"{pool.hit_ratio:.0%}"
            # Routable here means what the router does with a new session or an unkeyed request: a
            # draining backend takes none (the router answers 503 when no other one is up).
            up = sum(1 for b in pool.backends if b.healthy and not b.draining)
            draining = sum(1 for b in pool.backends if b.draining)
            heads.append(Content.from_markup(
                "[b]Pool $b[/]  sticky $s · hit $h · $p pins · $u/$n routable$d · up $t",
                b=shown(pool.bind), s=shown(pool.sticky), h=hit, p=str(pool.pins), u=str(up), n=str(len(pool.backends)),
                d=f" ({draining} draining)" if draining else "", t=_uptime(pool.uptime_s),
            ))
            for b in pool.backends:
                if b.healthy and b.state == "up" and not b.suspect:
                    health = Content.from_markup("[$success]● up[/]")
                elif b.healthy:
                    health = Content.from_markup("[$warning]◐ $s[/]", s="suspect" if b.suspect else b.state)
                else:
                    health = Content.from_markup("[$error]✗ $s[/]", s=b.state)
                drain = Content.from_markup("[$warning]draining[/]") if b.draining else Content("")
                name = b.node if len(pools) == 1 else f"{b.node} (:{pool.bind.rsplit(':', 1)[-1]})"
                table.add_row(name, health, str(b.in_flight), str(b.requests), str(b.errors), _ms(b.p50_ms), _ms(b.p99_ms), drain)
        title.update(Content("\n").join(heads))

    def render_shards(self) -> None:
        self.render_sources()
        if bool(self.live_shards()) != self.stoppable:
            self.stoppable = not self.stoppable
            self.query_one(KeyBar).refresh_keys()
        title = self.query_one("#shards-title", Static)
        table = self.query_one("#shard-ranks", DataTable)
        shards = self.shards or []
        title.display = bool(shards) or self.shards_error is not None
        table.display = bool(shards)
        title.update(shard_heads(shards, self.shards_error))
        table.clear()
        for shard in shards:
            for rank in shard.ranks:
                table.add_row(*rank_cells(shard, rank, len(shards) > 1))


def cache_lines(cache: NodeCache | None, error: str | None, pending: bool, width: int = 0) -> list[Content]:
    """The side pane's model-cache part: models on the node's disk, largest first, or why none are shown;
    a model per line, its name cut to the pane's `width` (0 before the first layout: 18 columns)."""
    name_width = max(10, width - 8) if width else 18
    head = "[$text-muted]cache[/]"
    if error is not None:
        return [Content.from_markup(f"{head} [$error]$e[/]", e=error)]
    if cache is None:
        return [Content.from_markup(f"{head} [$text-muted]$e[/]", e="… reading" if pending else "not read")]
    if not cache.reachable:
        return [Content.from_markup(f"{head} [$text-muted]node not reachable[/]")]
    if cache.error:
        return [Content.from_markup(f"{head} [$error]$e[/]", e=terminal_safe(cache.error, one_line=True))]  # the node's own words
    if not cache.models:
        return [Content.from_markup(f"{head} no model weights found")]
    cut = " (scan cut)" if cache.cut else ""
    lines = [Content.from_markup(f"{head} $n model$s · $g GiB$c", n=str(len(cache.models)), s="s" if len(cache.models) != 1 else "",
                                 g=f"{cache.total_bytes / 1024**3:.1f}", c=cut)]
    for model in cache.models[:CACHE_LINES]:
        name = terminal_safe(model.name, one_line=True)  # a folder's name on the node: shown, never obeyed
        if len(name) > name_width:  # a narrow pane (80×24): the repo's own name says more than its org
            name = name.rsplit("/", 1)[-1]
        name = name if len(name) <= name_width else name[: name_width - 1] + "…"
        lines.append(Content(f" {name:<{name_width}}{model.bytes / 1024**3:>6.1f}G"))
    if len(cache.models) > CACHE_LINES:
        lines.append(Content.from_markup(" [$text-muted]+$m more · c3 cache ls --node $n[/]", m=str(len(cache.models) - CACHE_LINES), n=cache.node or ""))
    return lines


def _endpoint(row: NodeRow, shown: str) -> Content:
    if row.endpoint_ok is None:
        return Content.from_markup("[$text-muted]? $h[/]", h=shown)
    if row.endpoint_ok:
        return Content.from_markup("[$success]●[/] $h", h=shown)
    return Content.from_markup("[$error]✗[/] $h", h=shown)


def _uptime(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"
