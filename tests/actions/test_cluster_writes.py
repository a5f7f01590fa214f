"""The cluster, pool, shard and spark writes as actions (`c3 serve`, `pool serve|drain|undrain|
install-service`, `recipes stop|install-service`, `profile restart|switch|set|unset|watchdog-check`,
`shard install-ray|start|stop`, `spark install-prereqs`): each one's plan, problems and run, on real
files, a real dockerd (the local node) and loopback; the netns hosts' tests drive the same classes
through the CLI (tests/nodes/test_cluster_hosts.py, tests/pool/test_drain.py)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import yaml

from backend.actions.base import ignore_progress
from backend.actions.drain_pool_node import DrainPoolNode, UndrainPoolNode
from backend.actions.install_cluster_service import InstallClusterService
from backend.actions.install_pool_service import InstallPoolService
from backend.actions.install_ray import InstallRay
from backend.actions.install_spark_prereqs import InstallSparkPrereqs
from backend.actions.profile_overrides import SetProfileOverrides, UnsetProfileOverrides
from backend.actions.registry import load_all
from backend.actions.restart_profile import RestartProfile
from backend.actions.serve_model import ServeModel
from backend.actions.serve_pool import ServePool
from backend.actions.start_shard import StartShard
from backend.actions.stop_recipe import StopRecipe
from backend.actions.stop_shard import StopShard
from backend.actions.switch_profile import SwitchProfile
from backend.actions.watchdog_round import WatchdogRound
from backend.errors import C3Error, EnvironmentProblem, Refused, UsageError
from tests.actions.conftest import Steps, free_port
from tests.nodes.cluster_helpers import stub_recipe

NEW_KEYS = {"serve", "pool_serve", "pool_drain", "pool_undrain", "pool_install_service", "recipe_stop_on_nodes", "cluster_install_service",
            "profile_restart", "profile_switch", "profile_set", "profile_unset", "profile_watchdog", "shard_install_ray", "shard_start",
            "shard_stop", "spark_install_prereqs"}


def test_every_cli_write_is_a_registered_action():
    assert NEW_KEYS <= set(load_all())


def _node(name: str, port: int = 9) -> None:
    from backend.nodes.registry import add_node

    add_node(name, f"http://127.0.0.1:{port}", "me@127.0.0.1", local=True)


def _recipe_and_profile(name: str = "pair") -> None:
    from backend.profiles import Profile, save_profile
    from backend.recipes import get_recipe

    folder = Path(os.environ["C3_HOME"]) / "recipes.d"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stub.yaml").write_text(yaml.safe_dump({"recipes": [stub_recipe("stub-pair", "sha256:" + "0" * 64, 18000)]}))
    save_profile(Profile(name=name, recipe="stub-pair", recipe_digest=get_recipe("stub-pair").digest(), nodes=["here"], base_url="http://127.0.0.1:18000/v1",
                         model="stub"))


# -- profiles ------------------------------------------------------------------------------------------
def test_profile_writes_on_nothing_are_problems_and_plans_not_tracebacks():
    [no_active] = RestartProfile(None).problems()
    assert no_active.blocking and no_active.message == "no active profile"
    assert RestartProfile("nope").plan().lines[0].startswith("restart profile nope: no profile `nope`")
    [missing] = SwitchProfile("nope").problems()
    assert missing.blocking and missing.message.startswith("no profile `nope`")
    with pytest.raises(C3Error, match="no profile `nope`"):
        SwitchProfile("nope").run(ignore_progress)
    assert WatchdogRound().run(ignore_progress).data.action == "no-profile"


def test_set_and_unset_overrides_check_the_recipe_and_write_the_profile():
    from backend.profiles import load_profile

    _recipe_and_profile()
    too_long = SetProfileOverrides("pair", ("max_model_len=100000",))
    [abort] = too_long.problems()
    assert abort.blocking and "65536" in abort.message
    with pytest.raises(Refused):
        too_long.run(ignore_progress)
    assert load_profile("pair").overrides == {}  # a refused write changes nothing
    ok = SetProfileOverrides("pair", ("max_model_len=8192",))
    assert ok.problems() == [] and ok.plan().lines[0] == "overrides: max_model_len=8192"
    assert ok.run(ignore_progress).message.startswith("pair: recipe + local overrides (max_model_len=8192)")
    assert load_profile("pair").overrides == {"max_model_len": 8192}
    assert UnsetProfileOverrides("pair", ("max_model_len",)).run(ignore_progress).message == "pair: overrides now none"
    assert load_profile("pair").overrides == {}


def test_switch_plans_to_stop_the_active_profile_first():
    from backend.profiles import set_active

    _recipe_and_profile("pair")
    _recipe_and_profile("other")
    set_active("other")
    plan = SwitchProfile("pair").plan()
    assert plan.lines[0] == "first: stop the active profile other" and plan.destructive
    set_active("pair")
    assert not any(line.startswith("first:") for line in SwitchProfile("pair").plan().lines)


# -- recipes -------------------------------------------------------------------------------------------
def test_recipe_stop_needs_registered_nodes_and_remembers_the_stop_on_the_local_node():
    from backend.profiles import is_stopped

    [unknown] = StopRecipe("stub-pair", ("ghost",)).problems()
    assert unknown.blocking and "not registered: ghost" in unknown.message
    with pytest.raises(Refused):
        StopRecipe("stub-pair", ("ghost",)).run(ignore_progress)
    assert not is_stopped("stub-pair")  # refused before the marker is written
    _node("here")
    action = StopRecipe("stub-pair", ("here",), name="pair")
    assert action.plan().lines[0] == "node here (rank 0): $ docker rm -f c3-profile_pair" and action.plan().destructive
    # The local node is this machine: the real dockerd is asked to remove a container that is not there.
    steps = Steps()
    done = action.run(steps)
    assert done.message == "stopped pair on here (remembered: the watchdog leaves it stopped)" and is_stopped("pair")


def test_cluster_units_are_planned_then_written_where_asked(tmp_path):
    action = InstallClusterService(tmp_path / "units", native_unit="")
    lines = action.plan().lines
    assert f"--- {tmp_path / 'units' / 'c3-cluster.service'}" in lines and any(line.startswith("ExecStart=") for line in lines)
    assert not (tmp_path / "units").exists()  # planning writes nothing
    steps = Steps()
    action.run(steps)
    said = [s.line for s in steps]
    assert f"wrote {tmp_path / 'units' / 'c3-cluster.service'}" in said and (tmp_path / "units" / "c3-cluster-watchdog.timer").is_file()
    assert said[-1].startswith("systemd is not running here (or a custom --unit-dir)")


# -- pool ----------------------------------------------------------------------------------------------
def test_pool_serve_checks_sticky_then_nodes_and_plans_each_backend():
    [sticky] = ServePool("a", sticky="cookie").problems()
    assert sticky.blocking and "cookie" in sticky.message
    [unknown] = ServePool("a,b").problems()
    assert "not registered: a, b" in unknown.message
    with pytest.raises(UsageError):
        ServePool("a", sticky="cookie").run(ignore_progress)
    _node("a", 8001)
    _node("b", 8002)
    plan = ServePool("a,b", "127.0.0.1", 8011, "header:X-Session").plan()
    assert plan.lines[:3] == ("listen on 127.0.0.1:8011, sticky header:x-session, route ring", "backend a: http://127.0.0.1:8001", "backend b: http://127.0.0.1:8002")
    config = ServePool("a,b", tuning={"probe_interval": 0.5, "retry_body_limit": 0}).config()
    assert (config.probe_interval_s, config.retry_body_limit) == (0.5, 0)


def test_drain_without_a_router_refuses_and_a_silent_port_is_an_environment_problem():
    [none] = DrainPoolNode("a").problems()
    assert none.message == "no pool router is running" and "c3 pool serve" in (none.hint or "")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert DrainPoolNode("a", port=port).plan().lines == (f"POST http://127.0.0.1:{port}/c3/drain?node=a (pool 127.0.0.1:{port})",)
    with pytest.raises(EnvironmentProblem, match="does not answer"):
        UndrainPoolNode("a", port=port).run(ignore_progress)


def test_pool_unit_is_shown_verified_and_written(tmp_path):
    _node("a", 8001)
    action = InstallPoolService("a", ":8011", 8011, "auto", 30.0, {"--upstream-timeout": 120.0}, tmp_path)
    plan = action.plan()
    assert plan.lines[0] == f"# {tmp_path / 'c3-pool-8011.service'}"
    assert any("--upstream-timeout 120" in line for line in plan.lines if line.startswith("ExecStart="))
    assert action.problems() == []
    done = action.run(ignore_progress)
    assert done.data == tmp_path / "c3-pool-8011.service" and done.data.read_text() == action.text()
    assert InstallPoolService("ghost", ":8011", 8011).problems()[0].message.startswith("node(s) not registered")


# -- shard, spark ----------------------------------------------------------------------------------------
def test_shard_writes_refuse_ray_ports_and_unknown_nodes():
    [ray_port] = StartShard("org/model", "a", ray_port=10005).problems()
    assert ray_port.message == "--ray-port 10005 is inside Ray's worker port range 10002–19999"
    _node("a")
    options = StartShard("org/model --max-model-len 4096", "a", tp=2).shard_options()
    assert (options.tp, options.pp, options.backend, options.api_port, options.model) == (2, 2, "ray", 8000, "org/model")
    assert StopShard("ghost").problems()[0].message.startswith("node(s) not registered")
    assert InstallRay("ghost").problems()[0].message.startswith("node(s) not registered")
    with pytest.raises(UsageError, match="not a version"):
        InstallRay("a", version="latest; rm -rf /").run(ignore_progress)


def test_spark_install_plans_exactly_the_apt_commands():
    from backend.spark import install_commands

    action = InstallSparkPrereqs()
    commands = install_commands(action.report())
    assert action.plan().lines == tuple(" ".join(argv) for argv in commands)
    assert [p.severity for p in action.problems()] == ([] if commands else ["noop"])


# -- c3 serve --------------------------------------------------------------------------------------------
def test_serve_a_model_on_the_simulated_rig(ws):
    from tests.runtime.helpers import stub_entry, write_catalog

    write_catalog([stub_entry()])
    port = free_port()
    refused = ServeModel("custom/stub", (0,), port, name="Bad Name", context=ws.ctx)
    with pytest.raises(UsageError, match="not a valid pod name"):
        refused.pod()
    assert refused.problems()[0].blocking
    action = ServeModel("custom/stub", (1,), port, context=ws.ctx)
    assert action.pod().name == "serve-stub" and action.plan().lines[0] == f"serve custom/stub as pod serve-stub on GPU 1, port {port} (fit: unknown)"
    steps = Steps()
    done = action.run(steps)
    assert done.ok and done.data.placement.verdict == "ok", done.message
    assert ws.ctx.runtime.workload("serve-stub").running and any(s.line for s in steps)
