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
from tests.cockpit.conftest import real_app, screen_text, settle, wait_for
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
