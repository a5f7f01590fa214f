"""The new-pod (and edit) form opens only once the GPUs have been read: opened before the first reading
it showed every GPU taken ("✗ 0 of 1 free", "free: none") and stayed so — seen in a 3-worker test run,
where `c3 demo` under load had drawn "No pods yet" before its first GPU reading landed."""

from __future__ import annotations

import threading

from c3.app import C3App
from c3.modals.new_pod import NewPodModal
from tests.cockpit.conftest import orchestration, wait_for


class GpusHeld:
    """The real facade, except that its GPU reading waits for `gate` and nothing is pushed (the screens poll)."""

    def __init__(self, inner, gate: threading.Event) -> None:
        self._inner = inner
        self._gate = gate

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def gpu_snapshots(self):
        self._gate.wait(60)
        return self._inner.gpu_snapshots()

    def subscribe(self, callback):
        return None


async def test_n_before_the_first_gpu_reading_opens_the_form_once_the_gpus_are_in(demo_world):
    gate = threading.Event()
    app = C3App(services=GpusHeld(demo_world.services(), gate))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: len(orchestration(app).pods) == 2, what="the pods")
            assert not orchestration(app).gpus_read
            await pilot.press("N")
            await wait_for(pilot, lambda: any("Reading the GPUs" in n.message for n in app._notifications), what="the notice")
            assert not isinstance(app.screen, NewPodModal)
            await pilot.press("N")  # asked twice: still one form
            gate.set()
            await wait_for(pilot, lambda: isinstance(app.screen, NewPodModal), what="the form")
            form = app.screen
            assert isinstance(form, NewPodModal)
            assert form.gpu_indices == sorted(orchestration(app).gpus) and form.gpu_indices, form.gpu_indices
            claimed = {g for p in orchestration(app).pods for g in p.gpus}
            assert form.free == [g for g in form.gpu_indices if g not in claimed] and form.free, form.free
            await pilot.pause()
            assert sum(isinstance(s, NewPodModal) for s in app.screen_stack) == 1
    finally:
        gate.set()
