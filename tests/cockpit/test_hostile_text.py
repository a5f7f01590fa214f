"""Names and values from files, users and remote systems reach the cockpit's screen only through the one
output sanitizer (backend.errors.terminal_safe; c3/look.py's SafeTextFilter): hostile text in the simulated
rig's estate, catalog.d, recipes.d and an engine log — escape sequences that set the window title or clear the
screen, CR, LF, BEL, a C1 CSI — shown in tables, lists, details, toasts, the confirm gate and the log viewer
is drawn with every control character shown as its escape, and nothing the terminal would act on is written."""

from __future__ import annotations

import re

import yaml
from textual.widgets import DataTable

from backend.actions.base import Outcome
from c3.modals.details import DetailsModal
from c3.modals.logs import LogsModal
from c3.modals.new_pod import NewPodModal
from tests.cockpit.conftest import gate_open, real_app, settle, wait_for
from tests.cockpit.world import USER_RECIPE

EVIL = "ev\x1b]0;PWNED\x07il\x1b[2J\r\n\x9b31mx"
"""Sets the window title (OSC 0, BEL), clears the screen (CSI 2J), returns the carriage, breaks the line,
and starts a one-byte C1 CSI."""
SHOWN = "ev\\x1b]0;PWNED\\x07il\\x1b[2J\\r\\n\\x9b31mx"
SLUG = f"custom/h{EVIL}"
# What Textual itself writes around the text: SGR colours, cursor moves, OSC 8 links.
_OWN = re.compile(r"\x1b\[[0-9;:]*[mHK]|\x1b\]8;[^\x07\x1b]*(\x1b\\|\x07)")
_RAW = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def _hostile_files() -> None:
    from backend import paths

    catalog = paths.user_catalog_dir()
    catalog.mkdir(parents=True, exist_ok=True)
    entry = {"slug": SLUG, "engine": "custom", "image": f"img{EVIL}:1", "model": f"org/m{EVIL}", "command": ["/bin/server", EVIL],
             "container_port": 8000, "health_path": "/v1/models", "tp": 1}
    (catalog / "hostile.yaml").write_text(yaml.safe_dump({"entries": [entry]}), encoding="utf-8")
    recipe = yaml.safe_load(USER_RECIPE)
    recipe.update(id="hostile-recipe", title=f"Title {EVIL}")
    recipe["hardware"]["description"] = f"hw {EVIL}"
    (paths.user_recipes_dir() / "hostile.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False), encoding="utf-8")
    estate = yaml.safe_load(paths.estate_file().read_text(encoding="utf-8"))
    estate["estate"].append({"name": "hostile", "slug": SLUG, "gpus": [1], "port": 8950})
    paths.estate_file().write_text(yaml.safe_dump(estate, sort_keys=False), encoding="utf-8")


def _log_line(world) -> None:
    from backend.sim.runtime import SimRuntime

    with SimRuntime().log_path("chat").open("a", encoding="utf-8") as log:
        log.write(f"INFO engine said {EVIL}\n")


def drawn(app) -> str:
    """What the terminal is sent for the whole screen as it stands, less Textual's own sequences."""
    update = app.screen._compositor.render_update(full=True)
    return _OWN.sub("", update.render_segments(app.console))


def assert_safe(app, where: str, shown: tuple[str, ...] = (SHOWN,)) -> str:
    text = drawn(app)
    raw = sorted(set(_RAW.findall(text)))
    assert not raw, f"{where}: raw control characters reach the terminal: {raw!r}"
    assert text.count("\n") == app.screen.size.height - 1, f"{where}: a line was split"
    for part in shown:
        assert part in text, f"{where}: the hostile text is not shown, every control character as its escape"
    return text


async def test_hostile_text_is_shown_escaped_everywhere(demo_world):
    _hostile_files()
    _log_line(demo_world)
    app, _ = real_app(demo_world)
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        pods = app._orchestration()
        await wait_for(pilot, lambda: "hostile" in [p.name for p in pods.pods], what="the hostile pod listed")
        pods.query_one("PodList").highlighted = [p.name for p in pods.pods].index("hostile")
        await settle(pilot)
        assert_safe(app, "orchestration")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailsModal), what="details")
        await settle(pilot)
        assert_safe(app, "details")
        await pilot.press("escape")
        await pilot.press("u")
        await wait_for(pilot, lambda: gate_open(app), what="the boot gate")
        await settle(pilot)
        assert_safe(app, "confirm gate")
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("N")
        await wait_for(pilot, lambda: isinstance(app.screen, NewPodModal), what="new pod")
        await pilot.press("tab", *"custom/h")
        await settle(pilot)
        assert_safe(app, "new pod")
        await pilot.press("escape")
        await pilot.press("3")
        await settle(pilot)
        table = app.screen.query_one("#recipes", DataTable)
        await wait_for(pilot, lambda: "hostile-recipe" in [key.value for key in table.rows], what="the hostile recipe listed")
        table.move_cursor(row=table.get_row_index("hostile-recipe"))
        await settle(pilot)
        assert_safe(app, "recipes")
        # Every write's outcome takes this path: a toast and the result line.
        app.show_result(Outcome(False, f"boot of hostile failed: {EVIL}", hint=f"see {EVIL}"))
        await settle(pilot)
        assert_safe(app, "toast")
        await pilot.press("1")
        await settle(pilot)
        pods.query_one("PodList").highlighted = [p.name for p in pods.pods].index("chat")
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, LogsModal), what="the log viewer")
        await wait_for(pilot, lambda: "engine said" in drawn(app), what="the hostile line")
        # A log is lines: its CR and LF end one (the runtime splits them), and each is shown with its escapes.
        assert_safe(app, "logs", shown=("said ev\\x1b]0;PWNED\\x07il\\x1b[2J", "\\x9b31mx"))


def test_the_line_filter_shows_every_control_and_keeps_the_line_width():
    """The guarantee under every widget, including one that forgets `shown`: escapes drawn visibly, the
    line cut back to the cells the layout gave it (a raw control has none), styles kept."""
    from rich.segment import Segment
    from rich.style import Style
    from textual.color import Color

    from c3.look import SafeTextFilter

    bold = Style(bold=True)
    line = [Segment("ab\x1b]0;t\x07cd", bold), Segment("\x9b2J  end")]
    width = Segment.get_line_length(line)
    out = SafeTextFilter().apply(line, Color(0, 0, 0))
    text = "".join(segment.text for segment in out)
    assert not _RAW.search(text) and text == "ab\\x1b]0;t\\x07c"  # 15 cells: what the layout gave "ab]0;tcd2J  end"
    assert Segment.get_line_length(out) == width and out[0].style == bold
    plain = [Segment("nothing to do")]
    assert SafeTextFilter().apply(plain, Color(0, 0, 0)) is plain


def _hostile_profile() -> None:
    """A launched profile whose file was edited by hand: its nodes (in rank order), recipe and endpoint
    are free text in profiles/NAME.yaml (only the name is checked: it is a file name)."""
    from backend.profiles import Profile, save_profile, set_active

    save_profile(Profile(name="hostile-profile", recipe=f"r{EVIL}", recipe_digest="0", nodes=[f"box{EVIL}", f"rank1{EVIL}"],
                         base_url=f"http://h{EVIL}:8000/v1", model="m", launched_at="2026-05-01T11:00:00Z"))
    save_profile(Profile(name="other", recipe="r", recipe_digest="0", nodes=[f"rank0{EVIL}"], base_url="http://127.0.0.1:8000/v1",
                         model="m", launched_at="2026-05-02T11:00:00Z"))
    set_active("hostile-profile")


async def test_hostile_profile_nodes_and_recipe_fields_are_one_line_in_recipes_switch_and_launch(demo_world):
    """The profile line (nodes in rank order), the Switch-profile list, the Launch dialog's recipe line
    and the Orchestration result line: each a one-line label whose text came from a file or quotes one,
    so each is drawn on its one line with CR and LF shown."""
    from c3.modals.launch import LaunchModal
    from c3.modals.switch_profile import SwitchProfileModal

    _hostile_files()
    _hostile_profile()
    app, _ = real_app(demo_world)
    async with app.run_test(size=(200, 45)) as pilot:
        await settle(pilot)
        await pilot.press("3")
        await wait_for(pilot, lambda: "hostile-profile" in drawn(app), what="the hostile profile line")
        await settle(pilot)
        assert_safe(app, "profile line", shown=("box" + SHOWN, "rank1" + SHOWN))
        await pilot.press("P")
        await wait_for(pilot, lambda: isinstance(app.screen, SwitchProfileModal) and app.screen.profiles is not None, what="switch profile")
        await settle(pilot)
        assert_safe(app, "switch profile", shown=("rank0" + SHOWN, "box" + SHOWN))
        await pilot.press("escape")
        await settle(pilot)
        table = app.screen.query_one("#recipes", DataTable)
        table.move_cursor(row=table.get_row_index("hostile-recipe"))
        await settle(pilot)
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, LaunchModal), what="launch")
        await settle(pilot)
        assert_safe(app, "launch", shown=(SHOWN + " — runs on",))  # the dialog's own line, not the detail pane behind it
        await pilot.press("escape")
        await settle(pilot)
        # The Orchestration screen's own result line says the last write's outcome too.
        app.show_result(Outcome(False, f"boot of hostile failed: {EVIL}", hint=f"see {EVIL}"))
        await pilot.press("1")
        await settle(pilot)
        assert_safe(app, "orchestration result line", shown=("failed: " + SHOWN,))


def test_labels_built_from_remote_text_keep_to_their_line():
    """Labels whose text another process or machine wrote — the gateway's status file, a node's cache
    scan, the GPU's name from a driver or a node, a fit reason quoting a slug — keep to their one line:
    a LF there would start a line the layout never gave it (the line filter sees only what is drawn)."""
    from backend.gateway.status import GatewayStatus, ModelStatus
    from backend.models import FitReport
    from backend.views.cache import NodeCache
    from c3.modals.gateway import gateway_head, notes
    from c3.screens.nodes import cache_lines
    from widgets.fit_breakdown import fit_lines
    from widgets.gpu_panel import short_name

    gateway = GatewayStatus(pid=1, bind=f"127.0.0.1:{EVIL}", updated_at=0.0,
                            models=[ModelStatus(pod="chat", held_for=f"held {EVIL}", last_error=f"error {EVIL}")])
    cache = NodeCache(node="box", local=False, reachable=True, error=f"scan {EVIL}", roots=[], models=[], total_bytes=0, cut=None,
                      elapsed_s=0.0, not_cached=[])
    report = FitReport.model_construct(verdict="tight", reasons=[f"slug {EVIL}"], gpus=[], learned=None, available_kv_gib=None,
                                       kv_cache_tokens=None, max_model_len_fits=None)
    one_line = {"gateway head": gateway_head(gateway).plain.split("\n")[0], "cache error": cache_lines(cache, None, False)[0].plain,
                "gpu name": short_name(f"NVIDIA {EVIL}"), **{f"gateway note {i}": c.plain for i, c in enumerate(notes(gateway))}}
    for where, text in one_line.items():
        assert SHOWN in text and "\n" not in text and not _RAW.search(text), f"{where}: {text!r}"
    assert "• slug " + SHOWN in fit_lines(report).plain.split("\n")
