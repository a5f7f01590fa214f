"""The cockpit's views at 80×24 over the real facade: the scrolled pod list keeps every pod's GPU lines,
views agree on a pod's state, and trouble toasts never cover an open modal."""

from __future__ import annotations

import asyncio

import pytest

from c3.screens.orchestration import PODS_PERIOD_S
from tests.cockpit.conftest import gate_open, orchestration, real_app, settle


def _visible_lines(widget) -> list[str]:
    """What the widget really drew, line by line (its scroll position included)."""
    return [widget.render_line(y).text.rstrip() for y in range(widget.scrollable_content_region.height)]


async def _boot_chat(pilot, app):
    """Press `u` on the stopped `chat` and confirm the boot; the Orchestration screen."""
    from tests.cockpit.conftest import wait_for

    await settle(pilot)
    orch = orchestration(app)
    await wait_for(pilot, lambda: orch.pods and orch.pods[0].state == "down", what="chat down")
    await pilot.press("u")
    await wait_for(pilot, lambda: gate_open(app), what="the boot gate")
    await pilot.press("y")
    return orch


def _pods_drawn_whole(pods, shown: dict, key, *, follows_highlight: bool = True) -> set[str]:
    """Every pod header on screen is followed by its lines — all of them, the way its option's text has
    them, GPU lines included — unless the list's bottom edge cuts it; when the view follows the
    highlight (keys, not the wheel), the highlighted pod is on screen and whole. Returns the pods seen."""
    seen: set[str] = set()
    name = pods.selected_pod if follows_highlight else None
    lines = _visible_lines(pods)
    heads = [i for i, line in enumerate(lines) if line.split(" ", 1)[0] in shown]
    assert name is None or any(lines[i].startswith(name + " ") for i in heads), (key, name, lines)
    for i in heads:
        pod = shown[lines[i].split(" ", 1)[0]]
        below = lines[i + 1:]
        ends = [j for j, line in enumerate(below) if not line.strip() or line.split(" ", 1)[0] in shown]
        block = below[: ends[0]] if ends else below
        cut = not ends  # the last pod on screen may run past the bottom edge
        if pod.name == name or not cut:
            # Drawn whole: the option's text, every GPU line with its memory and utilisation.
            prompt = pods.get_option(pod.name).prompt.plain
            drawn = " ".join(" ".join([lines[i], *block]).split())
            assert drawn == " ".join(prompt.split()), (key, pod.name, [lines[i], *block], prompt)
            assert sum("─ GPU" in line for line in block) == prompt.count("─ GPU") >= len(pod.gpus), (key, pod.name, block)
        seen.add(pod.name)
    return seen


@pytest.mark.parametrize("shared_world", ["bench"], indirect=True)
async def test_a_pod_list_that_starts_scrolling_keeps_every_line(shared_world):
    """Issue 14: "at 80 columns the pod list drops GPU lines once it scrolls" — found: when the list
    outgrows its height its scrollbar takes two columns without a resize, and Textual's OptionList keeps
    the option heights it measured at the wider width, so a line that fits the wide list but wraps in
    the narrow one loses its tail and the lines below it (a pod's GPU lines). Widths from 80 columns up
    are tried until one of the real pods' lines falls in that two-column window; then the list is
    filtered to one pod (no scrollbar) and the filter cleared (sixteen pods: the scrollbar comes), and
    every pod is walked with `j` and PageDown/PageUp, and the mouse wheel: each is drawn whole. Seen
    failing with PodList.render_lines' re-measure planted out."""
    from rich.cells import cell_len

    from c3.app import C3App

    real, _ = real_app(shared_world)
    # No poll timers: a new GPU reading changes a prompt, which makes OptionList measure every option
    # again and hid the drop within a second — the reason it "did not reproduce" before.
    app = C3App(real.services, clock=real.clock, autopoll=False, live=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = orchestration(app)
        pods = screen.query_one("#pods")
        bar = pods.styles.scrollbar_size_vertical
        window = None
        for width in range(80, 111):
            await pilot.resize_terminal(width, 24)
            await settle(pilot)
            wide = pods.scrollable_content_region.width + (bar if pods.show_vertical_scrollbar else 0)
            lines = [line for i in range(pods.option_count) for line in pods.get_option_at_index(i).prompt.plain.splitlines()]
            window = [line for line in lines if wide - bar < cell_len(line) <= wide]
            if window:
                break
        assert window, "no width from 80 to 110 columns puts a pod's line in the scrollbar's two columns"
        shown = {p.name: p for p in screen.shown_pods()}
        first = next(iter(shown))
        await pilot.press("slash", *f"^{first}", "space", "enter")
        await settle(pilot)
        assert [p.name for p in screen.shown_pods()] == [first] and not pods.show_vertical_scrollbar
        await pilot.press("escape")  # every pod again: now it scrolls
        await pilot.pause()
        assert pods.show_vertical_scrollbar
        seen: set[str] = set()
        for key in [None, *["j"] * (len(shown) - 1), "pageup", "pagedown", "wheel-up", "wheel-up", "wheel-down"]:
            wheel = bool(key and key.startswith("wheel"))
            if wheel:
                pods.scroll_relative(y=-3 if key == "wheel-up" else 3, animate=False)  # what a wheel notch does: scroll, the highlight stays
                await pilot.pause()
            elif key:
                await pilot.press(key)
                await pilot.pause()
            seen |= _pods_drawn_whole(pods, shown, (width, key), follows_highlight=not wheel)
        assert seen == set(shown)


@pytest.mark.parametrize("shared_world", ["bench", "mismatch"], indirect=True)
async def test_scrolled_pod_list_keeps_every_gpu_line_at_80x24(shared_world):
    """Issue 14: at 80 columns the pod list dropped GPU lines once it scrolled. Walk the sixteen pods with
    `j` to the bottom and `k` back: the highlighted pod is drawn whole (header and each of its GPU lines),
    and every pod header on screen is followed by its GPU lines unless the list's edge cuts it."""
    app, _ = real_app(shared_world)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = orchestration(app)
        pods = screen.query_one("#pods")
        shown = {p.name: p for p in screen.shown_pods()}
        assert len(shown) >= 3
        seen: set[str] = set()
        # `wait`: stay scrolled through two pod readings (new readings replace the options' text).
        keys = ["j"] * (len(shown) - 1) + ["wait"] + ["k"] * (len(shown) - 1) + ["wait"]
        for key in [None, *keys]:
            if key == "wait":
                await pilot.pause(2 * PODS_PERIOD_S + 0.5)
            elif key:
                await pilot.press(key)
                await pilot.pause()
            seen |= _pods_drawn_whole(pods, shown, key)
        assert pods.selected_pod == next(iter(shown))
        assert seen == set(shown)


async def test_trouble_toasts_never_cover_an_open_modal_at_80x24(demo_world):
    """Issue 14: at 80×24 trouble toasts covered modal content. A stub engine killed with SIGKILL is
    announced on the pod view; the New-pod form opened while that toast still shows is not covered by
    any toast (its fields and buttons compared with every toast's region); closing the form shows the
    trouble again, since it is still current."""
    import asyncio
    import os
    import signal

    from textual.widgets import Button, Input
    from textual.widgets._toast import Toast

    from backend.sim.runtime import SimRuntime
    from c3.modals.new_pod import NewPodModal
    from tests.cockpit.conftest import wait_for

    def toasts(screen) -> list:
        return [t for t in screen.query(Toast) if t.display and t.region.area]

    app, _ = real_app(demo_world)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settle(pilot)
        orch = orchestration(app)
        await wait_for(pilot, lambda: [p.state for p in orch.pods] == ["serving", "serving"], what="both pods serving")
        pid = (await asyncio.to_thread(SimRuntime().workload, "chat")).pids[0]
        os.kill(pid, signal.SIGKILL)
        await wait_for(pilot, lambda: any("chat: failed" in str(t.render()) for t in toasts(app.screen)), timeout=30, what="the failure toast")
        await pilot.press("N")
        await wait_for(pilot, lambda: isinstance(app.screen, NewPodModal), what="the New-pod form")
        await settle(pilot)
        modal = app.screen
        parts = [w for w in modal.query("*") if isinstance(w, (Button, Input)) and w.display and w.region.area]
        assert len(parts) >= 3
        covered = [(type(w).__name__, w.id, str(t.render())[:40]) for w in parts for t in toasts(modal) if w.region.overlaps(t.region)]
        assert covered == []
        # Nor through the backdrop: the pod view below keeps no trouble toast either.
        assert [str(t.render())[:40] for screen in app.screen_stack for t in toasts(screen) if "Attention" in str(t.render())] == []
        assert "⚠ 1 failed" in str(orch.query_one("#modebar").render())
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is orch, what="back on the pod view")
        await wait_for(pilot, lambda: any("chat: failed" in str(t.render()) for t in toasts(app.screen)), what="the failure shown again")


async def test_details_and_the_list_behind_it_agree_while_a_pod_is_killed(demo_world):
    """Issue 14: states briefly contradicted each other. The details modal read the workload straight from
    the runtime while the list behind it (paused under the modal) kept an older reading: `● serving` in
    the list beside `workload exited` in details. Kill a stub engine and open details at once, again until
    the failure shows: every time, the details' state, its workload line, the list row behind it and the
    mode bar's trouble count tell the same story."""
    import asyncio
    import os
    import signal

    from backend.sim.runtime import SimRuntime
    from tests.cockpit.conftest import wait_for

    app, _ = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        orch = orchestration(app)
        await wait_for(pilot, lambda: [p.state for p in orch.pods] == ["serving", "serving"], what="both pods serving")
        assert orch.query_one("#pods").selected_pod == "chat"
        pid = (await asyncio.to_thread(SimRuntime().workload, "chat")).pids[0]
        os.kill(pid, signal.SIGKILL)
        states = await _details_agree_until(pilot, app, "chat", "failed")
        assert states and states[-1][0] == "failed", states


async def _details_agree_until(pilot, app, name: str, final: str) -> list[tuple[str, str, str]]:
    """Open details of the highlighted pod again and again until the list shows `final`: every time, the
    details' state, its workload line, the list row behind it and the mode bar's failed count agree."""
    import asyncio

    from c3.modals.details import DetailsModal
    from tests.cockpit.conftest import screen_text, wait_for

    orch = orchestration(app)
    assert orch.query_one("#pods").selected_pod == name
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    states: list[tuple[str, str, str]] = []
    while loop.time() < deadline:
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailsModal) and "loading…" not in screen_text(app), what="details loaded")
        await pilot.pause()
        text = screen_text(app)
        workload = next(line for line in text.splitlines() if line.strip().startswith("workload"))
        row = next(p for p in orch.pods if p.name == name)
        states.append((row.state, text.splitlines()[0], workload))
        glyph = {"failed": "✗", "serving": "●", "booting": "◐", "down": "○"}[row.state]
        assert f"{glyph} {row.state}" in states[-1][1], states
        assert ("exited" in workload) == (row.state == "failed"), states
        if name in app.boots and not app.boots[name].done:
            # c3's own boot in flight says booting before its container runs (boot_panel.as_shown).
            assert row.state == "booting" and "exited" not in workload, states
        else:
            assert ("running" in workload) == (row.state in {"serving", "booting"}), states
        assert ("failed" in str(orch.query_one("#modebar").render())) == (row.state == "failed"), states
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is orch, what="back on the pod view")
        if row.state == final:
            break
        await pilot.pause(0.2)
    assert states and states[-1][0] == final, states
    return states


async def test_details_and_the_list_behind_it_agree_while_a_pod_boots(demo_world, monkeypatch):
    """The same during a boot: the list behind details said `○ down` beside `workload running`."""
    from backend.sim.runtime import SimRuntime
    from tests.cockpit.conftest import wait_for

    monkeypatch.setenv("C3_STUB_STARTUP_DELAY", "3")  # a boot long enough to open details during it
    SimRuntime().stop("chat", timeout=5.0)
    app, _ = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await wait_for(pilot, lambda: orchestration(app).pods and orchestration(app).pods[0].state == "down", what="chat down")
        await pilot.press("u")
        await wait_for(pilot, lambda: gate_open(app), what="the boot gate")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.screen is orchestration(app), what="back on the pod view")
        states = await _details_agree_until(pilot, app, "chat", "serving")
        assert any(s[0] == "booting" for s in states), states


async def test_a_write_result_waits_while_a_modal_is_open_at_80x24(demo_world, monkeypatch):
    """Issue 14: toasts covered modal content — write results too. A boot runs while the operator fills
    the New-pod form at 80×24; its result arrives then: no toast on the form or through its backdrop
    (the result line behind it has it), and the result's toast shows once the form is closed."""
    from textual.widgets import Button, Input
    from textual.widgets._toast import Toast

    from backend.sim.runtime import SimRuntime
    from c3.modals.new_pod import NewPodModal
    from tests.cockpit.conftest import wait_for

    def toasts(screen) -> list:
        return [t for t in screen.query(Toast) if t.display and t.region.area]

    monkeypatch.setenv("C3_STUB_STARTUP_DELAY", "3")  # the boot outlasts opening the form
    SimRuntime().stop("chat", timeout=5.0)
    app, _ = real_app(demo_world)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        orch = await _boot_chat(pilot, app)
        await wait_for(pilot, lambda: app.screen is orch and "chat" in app.boots, what="the boot running")
        assert app.last_result is None
        await pilot.press("N")
        await wait_for(pilot, lambda: isinstance(app.screen, NewPodModal), what="the New-pod form")
        modal = app.screen
        await wait_for(pilot, lambda: app.last_result is not None, timeout=60, what="the boot's result")
        assert app.last_result.ok, app.last_result
        for _ in range(5):  # the frames after the result landed
            await pilot.pause(0.1)
            parts = [w for w in modal.query("*") if isinstance(w, (Button, Input)) and w.display and w.region.area]
            covered = [(type(w).__name__, w.id, str(t.render())[:40]) for w in parts for t in toasts(modal) if w.region.overlaps(t.region)]
            assert covered == []
            assert [str(t.render())[:60] for screen in app.screen_stack for t in toasts(screen)] == []
        assert "serving" in str(orch.query_one("#result").render())
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is orch, what="back on the pod view")
        await wait_for(pilot, lambda: any("serving" in str(t.render()) for t in toasts(app.screen)), what="the result's toast")


async def test_the_boot_panel_and_the_pod_row_agree_through_a_boot(demo_world, monkeypatch):
    """Issue 14: states briefly contradicted each other — the boot panel said `◐ booting chat` while the
    pod row beside it still said `○ down` (the panel follows the boot, the row the last pod reading),
    and the row said `◐ booting` after the panel had gone and the result said serving. Boot a stub
    engine and look at every frame until it serves: what is drawn in the panel and in the row agree."""
    from tests.cockpit.conftest import wait_for

    monkeypatch.setenv("C3_STUB_STARTUP_DELAY", "1")
    gate = demo_world.base / "boot-gate"  # the stub stays booting until this file exists (a loaded box is not a race)
    monkeypatch.setenv("C3_STUB_BOOT_GATE", str(gate))
    from backend.sim.runtime import SimRuntime

    SimRuntime().stop("chat", timeout=5.0)
    app, _ = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        orch = orchestration(app)
        await wait_for(pilot, lambda: orch.pods and orch.pods[0].state == "down", what="chat down")
        pods, panel = orch.query_one("#pods"), orch.query_one("#boot")

        def drawn() -> tuple[str, str, str]:
            row = next(line for line in _visible_lines(pods) if line.startswith("chat "))
            state = next(s for s in ("booting", "serving", "down", "failed") if s in row)
            shown = str(panel.render()) if panel.display else ""
            said = app.last_result.message if app.last_result else ""
            return state, shown.splitlines()[0] if shown else "", said

        await pilot.press("u")
        await wait_for(pilot, lambda: gate_open(app), what="the boot gate")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.screen is orch, what="back on the pod view")
        frames: list[tuple[str, str, str]] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while loop.time() < deadline:
            await pilot.pause(0.05)
            frames.append(state := drawn())
            row, head, said = state
            if "◐ booting" in head and not gate.exists() and sum("◐ booting" in f[1] for f in frames) >= 5:
                gate.touch()  # five frames of the boot seen: let it finish
            if "◐ booting" in head:
                assert row == "booting", frames[-5:]
            if "✓" in head or "serving" in said:
                assert row == "serving", frames[-5:]
            if row == "serving":
                assert "◐ booting" not in head, frames[-5:]
            if "serving" in said and orch.readings[0].state == "serving":
                break
        assert any("◐ booting" in f[1] for f in frames), frames[:5]
        assert frames[-1][0] == "serving", frames[-5:]


@pytest.mark.parametrize("shared_world", ["bench"], indirect=True)
async def test_a_pushed_reading_is_folded_with_the_boot_in_flight(shared_world):
    """The full-suite flake of the test above, made certain: the hub pushes `serving` for a pod whose boot
    c3 is still running (the engine answered the hub's scrape before the boot's own probe). The pushed
    reading must be shown as the boot says — `booting` — beside the boot panel, like a polled one; and
    once the boot reports serving, the next reading stands on its own."""
    from dataclasses import replace
    from datetime import UTC, datetime

    from c3.services import BootProgress, PodsReading

    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        orch = orchestration(app)
        await pilot.pause(0.2)
        assert app.pushed, "the scene must be pushed to for this test to mean anything"
        first = next(p for p in orch.pods if p.state == "serving")
        app.boots[first.name] = BootProgress(first.name, "starting", 2.0)
        orch.boots_changed()
        readings = tuple(p if p.name != first.name else replace(p, state="serving") for p in orch.readings)
        orch.pods_pushed(PodsReading(pods=readings, taken_at=datetime.now(UTC)))
        await pilot.pause()
        shown = next(p for p in orch.pods if p.name == first.name)
        row = next(line for line in _visible_lines(orch.query_one("#pods")) if line.startswith(first.name + " "))
        assert shown.state == "booting" and "booting" in row and "serving" not in row, (shown.state, row)
        assert "◐ booting" in str(orch.query_one("#boot").render())
        assert [p.name for p in orch.readings] == [p.name for p in readings] and orch.readings[0] is readings[0]  # kept for the next fold
        del app.boots[first.name]
        orch.boots_changed()
        await pilot.pause()
        assert next(p for p in orch.pods if p.name == first.name).state == "serving"


async def test_a_boot_word_from_after_the_write_is_not_its_last(demo_world, monkeypatch):
    """The boot's words and its result reach the cockpit in order, and the result is the last word: a
    progress word from a thread that outlived the write (the boot's log ticker, whose join can time out
    on a loaded box) is dropped, not shown as `◐ booting` again after the result said serving."""
    import threading
    import time

    from c3.services import BootProgress
    from tests.cockpit.conftest import wait_for

    monkeypatch.setenv("C3_STUB_STARTUP_DELAY", "0.5")
    from backend.sim.runtime import SimRuntime

    SimRuntime().stop("chat", timeout=5.0)
    app, log = real_app(demo_world)
    inner_execute = log.inner.execute
    late: list[threading.Thread] = []

    def execute(plan, progress):
        result = inner_execute(plan, progress)
        word = BootProgress(plan.pod, "starting", 1.0)  # the ticker's word, said just after the write ended
        late.append(threading.Thread(target=lambda: (time.sleep(0.3), progress(word)), daemon=True))
        late[-1].start()
        return result

    log.inner.execute = execute
    async with app.run_test(size=(120, 40)) as pilot:
        orch = await _boot_chat(pilot, app)
        await wait_for(pilot, lambda: app.last_result is not None and "serving" in app.last_result.message, timeout=60, what="the boot's result")
        await wait_for(pilot, lambda: late and not late[0].is_alive(), what="the late word said")
        await settle(pilot)
        assert "chat" not in app.boots, app.boots
        assert "◐ booting" not in (str(orch.query_one("#boot").render()) if orch.query_one("#boot").display else "")


@pytest.mark.parametrize("shared_world", ["bench"], indirect=True)
async def test_a_polled_reading_overtaken_by_a_push_is_not_shown(shared_world):
    """The boot-panel test's flake, made certain: a boot's end asks for a pod poll at once; the hub then
    pushes `serving` (which ends the boot's `served` hold), and the poll, asked before the push, lands
    after it with its older `booting`. Shown, the row said booting after the result said serving."""
    import threading
    from dataclasses import replace
    from datetime import UTC, datetime

    from c3.services import PodsReading

    app, log = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        orch = orchestration(app)
        first = next(p for p in orch.pods if p.state == "serving")
        older = [replace(p, state="booting") if p.name == first.name else p for p in orch.readings]
        release = threading.Event()

        def pod_states():
            release.wait(10)
            return older

        log.inner.pod_states = pod_states
        orch._poll_pods()  # asked now, answered after the push below
        orch.pods_pushed(PodsReading(pods=tuple(orch.readings), taken_at=datetime.now(UTC)))
        release.set()
        await settle(pilot)
        assert next(p for p in orch.pods if p.name == first.name).state == "serving"
