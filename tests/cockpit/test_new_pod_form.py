"""The new-pod form's bugs from issue 14, each pinned: claimed GPUs never proposed, 2-GPU slugs not
`✓ fits` with one GPU free, the list and the fit line on the same GPUs, no stale fit once the GPU field
is emptied, 80×24 keeps the buttons and the whole free list, port collisions caught as typed, problems
said in the form (not a toast over it), --readonly refuses before the form opens, a refused request
comes back with its values."""

from __future__ import annotations

import socket

import pytest

from c3.modals.new_pod import NewPodModal, gpu_list
from c3.screens.orchestration import OrchestrationScreen
from tests.cockpit.conftest import gate_open, real_app, screen_text, settle, wait_for


async def open_form(pilot) -> NewPodModal:
    await pilot.press("N")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, NewPodModal), what="the new-pod modal")
    modal = pilot.app.screen
    await wait_for(pilot, lambda: bool(modal.entries), what="the catalog")
    return modal


async def form_with_fit(pilot) -> NewPodModal:
    """The form opened, a pod `solo` of vllm/qwen3-8b typed in, and its fit priced."""
    await settle(pilot)
    modal = await open_form(pilot)
    await pilot.press(*"solo", "tab", *"vllm/qwen3-8b")
    await wait_for(pilot, lambda: modal.report is not None and modal.slug == "vllm/qwen3-8b", what="the fit")
    return modal


def rows(modal) -> list[str]:
    slugs = modal.query_one("#slugs")
    return [str(slugs.get_option_at_index(i).prompt) for i in range(slugs.option_count)]


def test_gpu_list_is_short():
    assert gpu_list([0, 1, 2, 3]) == "0-3" and gpu_list([0, 2, 3]) == "0,2,3" and gpu_list([0, 2, 3, 4, 7]) == "0,2-4,7"
    assert gpu_list([]) == "none" and gpu_list([1]) == "1"


async def test_two_gpu_slugs_with_one_gpu_free_are_not_fits_and_claimed_gpus_never_proposed(shared_world):
    # placed: chat holds GPU 0, coder GPUs 2,3 — only GPU 1 is free.
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await open_form(pilot)
        await pilot.press(*"duo", "tab", *"tp2")
        await wait_for(pilot, lambda: modal.slug is not None and len(modal.verdicts) == len(modal.entries), what="verdicts")
        await settle(pilot)
        assert modal.query_one("#gpus").value == "1"  # the free GPU only, never 0, 2 or 3
        two = [row for row in rows(modal) if "-tp2" in row]
        assert two and not any("fits" in row for row in two), two
        assert all("1 of 2 free" in row for row in two), two


async def test_list_and_fit_line_agree_and_emptied_field_clears_the_fit(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        modal = await form_with_fit(pilot)
        await wait_for(pilot, lambda: modal.settled, what="the fit settled")
        await settle(pilot)
        row = next(r for r in rows(modal) if "vllm/qwen3-8b " in r)
        assert modal.report.verdict in row and "on GPU 1" in row  # the same verdict, on the GPUs shown
        gpus = modal.query_one("#gpus")
        gpus.focus()
        gpus.value = ""
        await wait_for(pilot, lambda: "choose GPUs first" in str(modal.query_one("#fit").render()), what="the fit line cleared")
        assert modal.report is None and "KV pool" not in str(modal.query_one("#fit").render())


@pytest.mark.parametrize("shared_world", ["empty"], indirect=True)
async def test_80x24_shows_buttons_and_every_free_gpu(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        modal = await open_form(pilot)
        await pilot.press(*"duo", "tab", *"tp2")
        await wait_for(pilot, lambda: modal.report is not None, what="the fit")
        await settle(pilot)
        for button in modal.query("Button"):
            # What is really drawn there (a clipped button keeps its region but is not what is shown).
            try:
                shown, _ = modal.get_widget_at(*button.region.center)
            except Exception:  # noqa: BLE001 - off screen
                shown = None
            assert shown is button, f"{button.id} cut off: {button.region}"
        check = str(modal.query_one("#gpus-check").render())
        assert "free: 0-3" in check
        assert modal.query_one("#gpus-check").region.width >= len(check.strip())


async def test_port_collisions_caught_as_typed_and_said_in_the_form(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await open_form(pilot)
        await pilot.press(*"web", "tab", *"vllm/qwen3-8b")
        await wait_for(pilot, lambda: modal.query_one("#port").value != "", what="the proposed port")
        port = modal.query_one("#port")
        port.focus()
        port.value = ""
        await pilot.press(*"8020")  # chat's
        await wait_for(pilot, lambda: "port 8020 is pod chat's" in screen_text(app), what="the port check")
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            holder.listen()
            busy = holder.getsockname()[1]
            port.value = ""
            await pilot.press(*str(busy))
            await wait_for(pilot, lambda: f"port {busy} is in use on this machine" in screen_text(app), what="the port check")
        # Create with a problem left: said in the form, no toast over it.
        port.value = "8020"
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, NewPodModal) and not app._notifications
        assert "port 8020 is pod chat's" in str(modal.query_one("#form-problem").render())


async def test_the_port_check_binds_in_a_worker_never_on_the_event_loop(shared_world, monkeypatch):
    """Whether something listens on the typed port is found by binding to it: that ran on the event
    loop on every keystroke in the port field. Now the facade checks it in a worker."""
    import threading

    loop_thread = threading.get_ident()  # the test and the app's event loop share this thread
    bound_on: list[bool] = []
    bind = socket.socket.bind

    def recording(self, address):
        bound_on.append(threading.get_ident() == loop_thread)
        return bind(self, address)

    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await open_form(pilot)
        await pilot.press(*"web", "tab", *"vllm/qwen3-8b")
        await wait_for(pilot, lambda: modal.query_one("#port").value != "" and modal.settled, what="the proposed port")
        port = modal.query_one("#port")
        port.focus()
        port.value = ""
        monkeypatch.setattr(socket.socket, "bind", recording)
        await pilot.press(*"8123")
        await wait_for(pilot, lambda: modal.settled, what="the port check")
        monkeypatch.undo()
        assert bound_on and not any(bound_on), f"{bound_on.count(True)} of {len(bound_on)} binds ran on the event loop"


async def test_readonly_refuses_before_the_form_opens(shared_world):
    app, _ = real_app(shared_world, readonly=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("N")
        await settle(pilot)
        assert isinstance(app.screen, OrchestrationScreen)
        assert "refused to create a pod" in app.last_result.message


async def test_a_refused_request_comes_back_with_its_values(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await open_form(pilot)
        await pilot.press(*"clash", "tab", *"vllm/qwen3-8b")
        await wait_for(pilot, lambda: modal.slug == "vllm/qwen3-8b" and modal.query_one("#port").value != "", what="the slug")
        modal.query_one("#gpus").value = "0"  # claimed by chat: the plan refuses it
        port = modal.query_one("#port").value
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: gate_open(app), what="the confirm gate")
        assert app.screen.plan.problems
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, NewPodModal), what="the form again")
        again = app.screen
        await settle(pilot)
        assert again.query_one("#name").value == "clash" and again.query_one("#gpus").value == "0"
        assert again.query_one("#port").value == port and again.slug == "vllm/qwen3-8b"
        assert "GPU 0" in str(again.query_one("#form-problem").render())
        assert not list(app._notifications)  # said in the form, not in a toast over it


async def test_a_modal_stops_the_backdrops_display_timers(shared_world):
    """Under a modal the screen beneath shows through its translucent backdrop, so each tick of its
    as-of clock repainted the whole terminal (bench/modal_bytes.py); the ticker pauses and resumes."""
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        orch = app._orchestration()
        assert orch.tickers and all(t._active.is_set() for t in orch.tickers)
        await pilot.press("question_mark")
        await settle(pilot)
        assert not any(t._active.is_set() for t in orch.tickers)
        await pilot.press("escape")
        await settle(pilot)
        assert all(t._active.is_set() for t in orch.tickers)


def test_add_node_key_file_checked_as_typed(tmp_path):
    from c3.modals.add_node import node_field_problem

    key = tmp_path / "id_ed25519"
    assert node_field_problem("key", "", set()) is None  # optional
    assert node_field_problem("key", str(key), set()) == f"no key file at {key}"
    assert node_field_problem("key", str(tmp_path), set()) == f"{tmp_path} is a folder, not a key file"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    assert node_field_problem("key", str(key), set()) is None


@pytest.mark.parametrize("shared_world", ["empty"], indirect=True)
async def test_down_from_the_filter_field_moves_into_the_slug_list_and_down_it(shared_world):
    """Issue 25: the header says "↑↓ pick a slug", but ↓ in the filter field did nothing. ↓ moves the
    focus into the list (its highlight where it was: the proposal); the next ↓ moves down it."""
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await open_form(pilot)
        await pilot.press(*"solo", "tab", *"qwen3")
        slugs = modal.query_one("#slugs")
        await wait_for(pilot, lambda: modal.slug is not None and slugs.option_count > 1, what="the filtered list")
        assert modal.focused.id == "filter"
        first = slugs.highlighted
        await pilot.press("down")
        await settle(pilot)
        assert modal.focused is slugs and slugs.highlighted == first
        await pilot.press("down")
        await settle(pilot)
        assert slugs.highlighted == first + 1 and modal.slug == slugs.get_option_at_index(first + 1).id
        modal.query_one("#name").focus()  # ↓ in another field is not the list's
        await pilot.press("down")
        await settle(pilot)
        assert modal.focused.id == "name" and slugs.highlighted == first + 1
        await pilot.press("escape")


async def test_the_fit_in_the_form_says_when_it_learned_from_this_rigs_boots(demo_world):
    """A boot of the same setup on record (backend/fit/learned.py): the New-pod fit prices with it and says so."""
    from backend.catalog import load_catalog
    from backend.fit import learn_boot
    from backend.views.gpus import gpus_at

    log = "Model loading took 15.2676 GiB and 9.1 seconds\nAvailable KV cache memory: 4.11 GiB\nGPU KV cache size: 29,920 tokens\n"
    rec, _ = learn_boot(load_catalog().get("vllm/qwen3-8b"), gpus_at([1]), log, pod="solo")
    assert rec is not None
    app, _ = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        modal = await form_with_fit(pilot)
        await wait_for(pilot, lambda: modal.settled and modal.report is not None, what="the fit settled")
        assert modal.report.source == "learned" and modal.report.available_kv_gib == 4.11
        await wait_for(pilot, lambda: "measured on this rig: learned from 1 boot on" in str(modal.query_one("#fit").render()), what="the mark")


async def test_the_list_ranks_by_kv_left_and_tight_does_not_demote(shared_world):
    """GPU 1 (an RTX 3090) is the free one: the AWQ Qwen3-8B leaves 13.9 GiB of KV there (`tight`, an
    uncertainty note), the BF16 one 4.6 GiB (`fits`); the AWQ one ranks first, each row says its KV."""
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await open_form(pilot)
        await pilot.press(*"solo", "tab", *"vllm/qwen3-8b")
        await wait_for(pilot, lambda: modal.settled, what="verdicts")
        await settle(pilot)
        listed = [r for r in rows(modal) if "vllm/qwen3-8b" in r]
        assert len(listed) == 2 and "vllm/qwen3-8b-awq" in listed[0], listed
        assert "tight 13.9 GiB" in listed[0] and "fits 4.6 GiB" in listed[1], listed
