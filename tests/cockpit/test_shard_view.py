"""The Nodes mode's Shards section over a real running shard (issue 24): the two-node mp runner of
tests/shard (both nodes this machine, the stand-in vLLM), announced by the runner itself, read by the
real facade in a worker. A rank SIGKILLed while serving is shown dead, naming its node, within 5 s, and
stays so (with the runner's reason) once the runner has stopped the rest."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from c3.screens.nodes import NodesScreen
from tests.cockpit.conftest import gate_open, real_app, screen_text, settle, wait_for
from tests.shard.conftest import stop_c3
from tests.shard.test_first_token import ours, start
from tests.support import wait_until

EMPTY = pytest.mark.parametrize("demo_world", ["empty"], indirect=True)


def _rank_line(text: str, node: str) -> str:
    return next((line for line in text.splitlines() if line.startswith(f"{node}  ") and "vllm serve rank" in line), "")


@EMPTY
async def test_a_rank_killed_while_serving_is_shown_dead_naming_its_node_within_5_s(demo_world, tmp_path):
    proc, log, api = start(tmp_path)
    try:
        wait_until(lambda: "c3: serving:" in log.read_text(), 60, "serving", interval=0.2, proc=proc, log=log)
        app, svc = real_app(demo_world)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            await pilot.press("2")
            screen = app.screen
            assert isinstance(screen, NodesScreen)
            await wait_for(pilot, lambda: "● serving" in screen_text(app), timeout=30, what="the shard shown serving")
            text = screen_text(app)
            assert "Shard org/m" in text and f"--backend mp · http://127.0.0.1:{api}/v1" in text, text
            assert "● running" in _rank_line(text, "a") and "● running" in _rank_line(text, "b"), text
            rank1 = next(pid for pid in ours(tmp_path) if b"--node-rank\x001\x00" in Path(f"/proc/{pid}/cmdline").read_bytes()
                         and b"serve" in Path(f"/proc/{pid}/cmdline").read_bytes())
            assert f"  {rank1}  " in _rank_line(text, "b"), text  # the rank's own pid
            killed = time.monotonic()
            os.kill(rank1, signal.SIGKILL)
            await wait_for(pilot, lambda: "✗ dead" in _rank_line(screen_text(app), "b"), timeout=10, what="rank 1 on b shown dead")
            shown_s = time.monotonic() - killed
            text = screen_text(app)
            assert "● serving" not in text, text
            assert "shards" in svc.calls
            # Once the runner stopped the rest, the report stays: stopped, why, and the rank that died still dead on b.
            await wait_for(pilot, lambda: "■ stopped" in screen_text(app), timeout=30, what="the shard shown stopped")
            text = screen_text(app)
            assert "phase serve failed on node b: vllm serve (rank 1, headless) exited with status" in text, text
            assert "✗ dead" in _rank_line(text, "b") and "■ stopped" in _rank_line(text, "a"), text
        print(f"cockpit: rank 1 killed while serving shown dead on b after {shown_s:.2f}s", file=sys.stderr)
        assert shown_s < 5, shown_s
        proc.wait(timeout=60)
    finally:
        stop_c3(proc)
    wait_until(lambda: not ours(tmp_path), 10, "no stand-in left", interval=0.2)


@EMPTY
async def test_d_stops_the_live_shard_after_the_confirm_and_shows_the_result(demo_world, tmp_path, monkeypatch):
    """`d` in the Shards section: the confirm gate names the shard and its nodes; Esc leaves every rank running;
    confirmed, the stop (in a worker) ends both ranks and the runner ("stopped by request", exit 0), and the
    result line says which shard it stopped."""
    from backend.shard.scripts import STOP_MARKERS

    assert STOP_MARKERS.startswith('"$HOME"')
    monkeypatch.setenv("HOME", str(tmp_path))  # the stop marker goes under ~/.c3/shard, the runner reads it there
    proc, log, api = start(tmp_path)
    try:
        wait_until(lambda: "c3: serving:" in log.read_text(), 60, "serving", interval=0.2, proc=proc, log=log)
        ranks = [pid for pid in ours(tmp_path) if pid != proc.pid]
        tag = f"a-{api - 1}"
        app, _ = real_app(demo_world)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            await pilot.press("2")
            await wait_for(pilot, lambda: "● serving" in screen_text(app), timeout=30, what="the shard shown serving")
            await wait_for(pilot, lambda: "d Stop shard" in screen_text(app), what="`d` in the key bar")
            await pilot.press("d")
            await wait_for(pilot, lambda: gate_open(app), what="the stop gate")
            text = screen_text(app)
            assert f"Stop shard {tag} on a, b" in text and f"C3_SHARD={tag}; other shards there keep running" in text, text
            assert "ray stop" not in text  # an mp shard: its record says so
            await pilot.press("escape")
            await settle(pilot)
            assert isinstance(app.screen, NodesScreen) and app.last_result is None
            assert proc.poll() is None and all(Path(f"/proc/{pid}").exists() for pid in ranks)

            await pilot.press("d")
            await wait_for(pilot, lambda: gate_open(app), what="the stop gate again")
            await wait_for(pilot, lambda: getattr(app.screen.focused, "id", None) == "cancel", what="Cancel focused")
            await pilot.press("y")
            await wait_for(pilot, lambda: app.last_result is not None, timeout=60, what="the stop's result")
            assert app.last_result.ok, app.last_result
            assert app.last_result.message == f"stopped shard {tag} on a, b"
            await wait_for(pilot, lambda: f"✓ stopped shard {tag} on a, b" in screen_text(app), what="the result shown")
            assert proc.wait(timeout=60) == 0
            await wait_for(pilot, lambda: "■ stopped" in screen_text(app), timeout=30, what="the shard shown stopped")
            assert "stopped by request" in screen_text(app)
            await wait_for(pilot, lambda: "Stop shard" not in screen_text(app), what="`d` gone: nothing left to stop")
        assert "c3: stopped by request (`c3 shard stop` on a, b)" in log.read_text()
    finally:
        stop_c3(proc)
    wait_until(lambda: not ours(tmp_path), 10, "no stand-in left", interval=0.2)
