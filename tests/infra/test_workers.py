"""tests/plugins/workers.py under a real pytest-xdist run: each test lands in the group of the machine-wide
thing it uses, a group runs on one worker, a line a worker has for the terminal summary is printed, and
the real-engine build at collection (tests/plugins/real_engine.py) runs on one worker only.

The inner suite names its fixtures as the rig's do (bodies are stand-ins: nothing machine-wide is used;
the engine build is replaced by one that records who called it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = """
import json, os
from pathlib import Path

import pytest

pytest_plugins = ["tests.plugins.workers", "tests.plugins.real_engine"]


def pytest_configure(config):
    from scripts.rig import real_engines

    def build_all(log):
        builds = Path(os.environ["C3_TEST_BUILDS"])
        (builds / str(os.environ.get("PYTEST_XDIST_WORKER"))).write_text("built")

    real_engines.build_all = build_all


@pytest.fixture(scope="session")
def docker_client():
    return "daemon"


@pytest.fixture(scope="session")
def real_engines(pytestconfig):
    from tests.plugins.workers import summary_line

    summary_line(pytestconfig, "engines stand-in ready")
    return "engines"


@pytest.fixture(scope="session")
def host_rig_factory():
    return "rig"


@pytest.fixture
def docker_hosts(host_rig_factory, docker_client):
    return "hosts with their own dockerd"


@pytest.fixture
def demo_world():
    return "world"


@pytest.fixture(autouse=True)
def _record(request):
    yield
    out = Path(os.environ["C3_TEST_RECORD"]) / (request.node.name + ".json")
    out.write_text(json.dumps({"nodeid": request.node.nodeid, "worker": os.environ.get("PYTEST_XDIST_WORKER")}))
"""

TESTS = """
import pytest


@pytest.fixture(scope="module")
def expensive():
    return 1


def test_docker_a(docker_client): pass
def test_docker_b(docker_client): pass
@pytest.mark.docker
def test_docker_by_marker(): pass
def test_hosts_and_docker(docker_hosts): pass
@pytest.mark.netns
def test_netns_by_marker(): pass
@pytest.mark.real_engine
def test_engine_by_marker(): pass
def test_engine(real_engines): pass
def test_world(demo_world): pass
def test_shared_a(expensive): pass
def test_shared_b(expensive): pass
@pytest.mark.docker
@pytest.mark.xdist_group("mine")
def test_own_group(): pass
def test_plain_a(): pass
def test_plain_b(): pass
"""


def test_groups_run_together_and_worker_summary_lines_reach_the_terminal(pytester, tmp_path, monkeypatch):
    record, builds = tmp_path / "record", tmp_path / "builds"
    record.mkdir()
    builds.mkdir()
    monkeypatch.setenv("C3_TEST_RECORD", str(record))
    monkeypatch.setenv("C3_TEST_BUILDS", str(builds))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=TESTS)
    pytester.makeini("[pytest]\nmarkers =\n    docker: d\n    netns: n\n    real_engine: r\n")
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", timeout=240)
    result.assert_outcomes(passed=13)
    ran = {p.stem: json.loads(p.read_text()) for p in record.iterdir()}
    groups = {name: r["nodeid"].rpartition("@")[2] if "@" in r["nodeid"] else None for name, r in ran.items()}
    assert groups == {
        "test_docker_a": "docker", "test_docker_b": "docker", "test_docker_by_marker": "docker",
        "test_hosts_and_docker": "netns", "test_netns_by_marker": "netns", "test_engine_by_marker": None, "test_engine": None, "test_world": "world",
        "test_shared_a": "test_inner.py", "test_shared_b": "test_inner.py", "test_own_group": "mine",
        "test_plain_a": None, "test_plain_b": None,
    }
    for group in ("docker", "netns", "test_inner.py"):
        assert len({ran[name]["worker"] for name, g in groups.items() if g == group}) == 1, group
    assert {r["worker"] for r in ran.values()} <= {"gw0", "gw1"}
    # Said in a worker (the engines stand-in's set-up), printed once by the controller, with the worker's name.
    lines = [line for line in result.outlines if "engines stand-in ready" in line]
    assert len(lines) == 1 and lines[0].startswith("[gw"), result.outlines[-20:]
    # Both workers collected the real_engine tests; the first built, once, and said so.
    assert [p.name for p in builds.iterdir()] == ["gw0"]
    assert [line for line in result.outlines if "real engines:" in line] == ["[gw0] real engines: ready (0s to build or find)"]
