"""`t` on the Orchestration screen: the test prompt of `c3 pod try` for the highlighted pod, run in a
worker over the real facade on the demo's simulated world (stub engines that stream)."""

from __future__ import annotations

from backend.errors import Refused
from c3.app import C3App
from c3.screens.orchestration import OrchestrationScreen
from tests.cockpit.conftest import orchestration, real_app, screen_text, settle, wait_for
from tests.cockpit.scenes import converged
from tests.cockpit.test_nonblocking import SlowServices


async def test_t_tries_the_highlighted_pod_and_shows_answer_and_numbers(shared_world):
    app, svc = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        orchestration(app).query_one("#pods").focus()
        await pilot.press("j")  # coder
        await pilot.press("t")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "TryModal" and "TTFT" in screen_text(app), what="the answer and its numbers")
        assert app.screen.pod == "coder"
        text = screen_text(app)
        assert "try pod coder" in text and "TTFT" in text and " tokens · " in text
        assert app.screen.result is not None and app.screen.result.answer.strip() and app.screen.result.tokens > 0
        assert app.screen.result.answer.split()[0] in text  # the answer itself is shown
        assert "try_pod" in svc.calls
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, OrchestrationScreen)
        assert "Try a prompt on pod chat" in [c.title for c in app.get_system_commands(app.screen)]  # the palette has it too
        await pilot.press("question_mark")
        await settle(pilot)
        assert "test prompt" in screen_text(app)  # and the help, from the binding


async def test_t_runs_off_the_event_loop_and_shows_a_refusal(shared_world):
    real = shared_world.services()
    converged(real)

    class Refusing(SlowServices):
        def __getattr__(self, name):
            if name != "try_pod":
                return super().__getattr__(name)
            slow = super().__getattr__(name)

            def refuse(*args, **kwargs):
                slow(*args, **kwargs)  # the real call, timed and checked for the loop thread
                raise Refused("pod chat is not running (stopped)", hint="`c3 pod up chat` first")

            return refuse

    slow = Refusing(real)
    app = C3App(slow, clock=real.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        orchestration(app).query_one("#pods").focus()
        await pilot.press("t")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "TryModal" and "not running" in screen_text(app), what="the refusal")
        text = screen_text(app)
        assert "✗ pod chat is not running (stopped)" in text and "select pod chat and press u first" in text
    assert "try_pod" in slow.names and slow.on_loop == []
