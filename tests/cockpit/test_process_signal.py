"""The process view's signal keys on the real facade over the demo's simulated world: a real process
on a simulated GPU (registered in the rig's GPU registry, as a stub engine registers itself), signalled
only through the confirm gate — a foreign one only with the gate's own key, never `y` — and gone from
the simulated GPU afterwards, the result said in the view."""

from __future__ import annotations

import signal
import subprocess

import pytest

from c3.modals.confirm import ConfirmModal
from tests.cockpit.conftest import gate_open, real_app, screen_text, settle, wait_for

ALIAS = 4445


@pytest.mark.parametrize("shared_world", ["mismatch"], indirect=True)
async def test_a_foreign_process_is_signalled_only_with_the_gates_own_key(shared_world):
    from backend.gpu.registry import default_registry_dir
    from backend.stub_registry import own_pidns

    app, _log = real_app(shared_world)
    job = subprocess.Popen(["sleep", "600"], start_new_session=True)
    shared_world.pids[job.pid] = ALIAS  # the scenes' facade shows pids by alias
    with shared_world.active():
        registration = default_registry_dir() / f"job-{job.pid}.gpu"
    registration.write_text(f"pid {job.pid}\nname job\npidns {own_pidns()}\ngpu 2 1024 0\n", encoding="utf-8")
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, rounds=4)
            await pilot.press("p")
            await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ProcessesModal" and ALIAS in {r.pid for r in app.screen.rows or ()},
                           what="the job in the process view")
            view = app.screen
            await pilot.press("slash", *str(ALIAS), "enter")
            await wait_for(pilot, lambda: [r.pid for r in view.shown] == [ALIAS], what="the job alone, filtered")
            await pilot.press("K")
            await wait_for(pilot, lambda: gate_open(app), what="the confirm gate")
            text = screen_text(app)
            for shown in (f"Send SIGKILL to pid {ALIAS}", "sleep 600", "GPU: 2 (1,024 MiB)", "owner: foreign", "Signal foreign process  f"):
                assert shown in text, (shown, text)
            await pilot.press("y")  # the usual key does not confirm a foreign process
            await settle(pilot)
            assert isinstance(app.screen, ConfirmModal) and job.poll() is None, "y signalled a foreign process"
            await pilot.press("f")
            await wait_for(pilot, lambda: job.poll() is not None, what="the job to exit")
            assert job.returncode == -signal.SIGKILL
            await wait_for(pilot, lambda: app.screen is view and view.result is not None, what="the result in the view")
            # The result is the facade's own words (its pids are not aliased: only reads and plans are).
            assert view.result.ok and view.result.message == f"sent SIGKILL to pid {job.pid} (foreign, GPU 2): it exited", view.result
            assert f"✓ sent SIGKILL to pid {job.pid}" in screen_text(app)
            await wait_for(pilot, lambda: ALIAS not in {r.pid for r in view.rows or ()}, what="the job gone from the simulated GPU")
    finally:
        registration.unlink(missing_ok=True)
        shared_world.pids.pop(job.pid, None)
        if job.poll() is None:
            job.kill()
        job.wait(10)


@pytest.mark.parametrize("shared_world", ["mismatch"], indirect=True)
async def test_a_pods_process_shows_its_pod_in_the_gate_and_cancel_sends_nothing(shared_world):
    app, _log = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, rounds=4)
        await pilot.press("p")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ProcessesModal" and app.screen.rows, what="the process view")
        view = app.screen
        await pilot.press("slash", *"chat", "enter")
        await wait_for(pilot, lambda: view.shown and all(r.pod == "chat" for r in view.shown), what="chat's process")
        real_pid = next(pid for pid, alias in shared_world.pids.items() if alias == view.shown[0].pid)
        await pilot.press("T")
        await wait_for(pilot, lambda: gate_open(app), what="the confirm gate")
        text = screen_text(app)
        assert "owner: pod chat" in text and "Confirm  y" in text and "Signal foreign" not in text, text
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is view
        import os

        os.kill(real_pid, 0)  # still there: cancelled means nothing sent
