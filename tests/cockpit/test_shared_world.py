"""The shared world's reset is verified, not assumed: a test that changes the world it was lent fails by
name, and the next test gets a fresh world; a test that only looks leaves the same world for the next.
Run as pytest runs them: a child pytest over a small test file using the cockpit's own fixtures."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.cockpit import world
from tests.cockpit.world import ROOT

TESTS = '''
from tests.cockpit.shared import KEEPER


def test_looks(shared_world):
    global first, builds
    first, builds = shared_world, KEEPER.builds


def test_looks_again(shared_world):
    assert shared_world is first and KEEPER.builds == builds, "a world left unchanged was not shared"


def test_writes(shared_world):
    {write}


def test_after_the_writer(shared_world):
    assert shared_world is not first and KEEPER.builds == builds + 1, "the changed world was shared on"
    {fresh}
'''


# The child builds worlds, which bind the fixed ports under the machine-wide world lock: run it on the
# worker that runs the other world tests (otherwise it waits for that worker's lock: 66 s of a 2-worker
# run once), after this process has let go of any world it keeps.
@pytest.mark.xdist_group("world")
def test_a_test_that_changes_the_shared_world_fails_by_name_and_the_next_gets_a_fresh_one(tmp_path):
    for release in world.before_build:
        release()
    assert world._lock_state["holders"] == 0, "this process still holds a world: the child would wait for its lock"  # noqa: SLF001
    write = ('from backend.nodes.registry import add_node; from backend.sim.runtime import SimRuntime\n'
             '    add_node("n9", "http://10.213.0.9:8000", "u@10.213.0.9"); SimRuntime().stop("chat", timeout=5.0)')
    fresh = ('from backend.nodes.registry import load_registry; from backend.sim.runtime import SimRuntime\n'
             '    assert [n.name for n in load_registry().nodes] == ["box"] and SimRuntime().workloads()["chat"].running')
    (tmp_path / "test_child.py").write_text(TESTS.format(write=write, fresh=fresh), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "pytest", "-p", "tests.cockpit.conftest", "-p", "no:cacheprovider", "-q", "-rE", "test_child.py"]
    out = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert "4 passed, 1 error" in out.stdout, out.stdout + out.stderr
    assert "ERROR at teardown of test_writes" in out.stdout, out.stdout
    said = "test_child.py::test_writes changed the shared `placed` world (files under $C3_HOME: nodes.json; workloads: "
    assert said in out.stdout, out.stdout
