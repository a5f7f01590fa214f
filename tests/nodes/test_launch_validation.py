"""Issue 24: a launch validates everything before any side effect. Each case runs `c3` as a user would,
on a local node whose `docker` is a stand-in that records its argv (tests/nodes/standin.py): a refused
launch must leave no `docker run`, no stopped active profile, no env file and no profile behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from tests.nodes.cluster_helpers import HF_SECRET, C3Runner, stub_recipe
from tests.nodes.standin import StandIn, standin_docker

IMAGE_ID = "sha256:" + "ab" * 32


def _home() -> Path:
    return Path(os.environ["C3_HOME"])


def _state() -> Path:
    return Path(os.environ["C3_STATE"])


def _write_recipe(**changes: object) -> None:
    recipe = {**stub_recipe("solo", IMAGE_ID, 18123), "nodes": 1, **changes}
    (_home() / "recipes.d").mkdir(parents=True, exist_ok=True)
    (_home() / "recipes.d" / "solo.yaml").write_text(yaml.safe_dump(recipe))


@pytest.fixture
def rig(tmp_path) -> StandIn:
    """Node `here` (this machine), recipe `solo`, an active profile `old` running on `here`."""
    from backend.nodes.registry import add_node
    from backend.profiles import Profile, save_profile, set_active

    add_node("here", "http://127.0.0.1:18123", "me@127.0.0.1", local=True)
    _write_recipe()
    save_profile(Profile(name="old", recipe="solo", recipe_digest="x", nodes=["here"], base_url="http://127.0.0.1:18123/v1", model="stub"))
    set_active("old")
    return standin_docker(tmp_path)


def _refused(rig: StandIn, result, code: int = 2) -> str:
    """One `c3: error:` line, the exit code, and no side effect at all."""
    err = result.stderr
    assert result.returncode == code, (result.returncode, result.stdout, err)
    assert "Traceback" not in err + result.stdout
    assert err.startswith("c3: error: ") and len([ln for ln in err.splitlines() if ln.startswith("c3: error:")]) == 1, err
    calls = rig.calls()
    assert not [c for c in calls if c[:1] == ["run"] or c[:1] == ["rm"]], calls
    assert not list(_state().rglob("*.env")) and not list(rig.tmp.parent.rglob("x-here.env"))
    assert (_home() / "profiles" / "active").read_text().strip() == "old"
    assert not (_state() / "stopped" / "old").exists()
    return err


def _launch(rig: StandIn, *args: str) -> object:
    return C3Runner()("recipes", "launch", *args, env={**rig.env, "HF_TOKEN": HF_SECRET}, timeout=60)


@pytest.mark.parametrize("name", ["MyProfile", "../../x", "a/b", "a..b", "-x", "x" * 61])
def test_a_bad_profile_name_is_refused_before_anything_runs(rig, name):
    err = _refused(rig, _launch(rig, "solo", "--nodes", "here", "--name", name, "--no-wait"))
    assert "profile name" in err


@pytest.mark.parametrize("field", ["{model.nope}", "{rank[0]}", "{port:>999999999}", "{port!r}", "{nope}", "{port:{rank}}", "{}", "{0}"])
def test_a_hostile_template_field_is_refused_also_in_dry_run(rig, field):
    _write_recipe(command=["--port", "{port}", "--x", field])
    _refused(rig, _launch(rig, "solo", "--nodes", "here", "--no-wait"))
    _refused(rig, _launch(rig, "solo", "--nodes", "here", "--dry-run"))


def test_template_fields_fill_with_a_bounded_spec():
    from backend.recipes.template import fill

    assert fill("{port:>6}-{rank}-{{x}}", {"port": 80, "rank": 1}) == "    80-1-{x}"


@pytest.mark.parametrize("image", ["--privileged", "-v/:/host", "img name", "img$(touch x)", ""])
def test_an_image_that_is_not_a_reference_is_refused(rig, image):
    err = _refused(rig, _launch(rig, "solo", "--nodes", "here", f"--set=image={image}", "--allow-unpinned", "--no-wait"))
    assert "image" in err


def test_docker_run_ends_its_options_before_the_image():
    from backend.cluster.plan import render
    from backend.recipes import Recipe
    from backend.remote.node import Node

    recipe = Recipe.model_validate({**stub_recipe("solo", IMAGE_ID, 18123), "nodes": 1})
    argv = render(recipe, [Node(name="n1", host="http://10.0.0.1:1", ssh="u@10.0.0.1")]).ranks[0].run_argv
    assert argv[argv.index(IMAGE_ID) - 1] == "--"


@pytest.mark.parametrize("port", ["80@evil.example", "0", "65536", "-1", "8000/v1"])
def test_a_recipe_port_that_is_not_a_port_is_refused(rig, port):
    _write_recipe(defaults={"port": port, "max_model_len": 4096, "startup_delay": 0.3})
    err = _refused(rig, _launch(rig, "solo", "--nodes", "here", "--dry-run"))
    assert "port" in err


@pytest.mark.parametrize("port", ["0", "65536", "99999999"])
def test_a_port_override_out_of_range_is_refused(rig, port):
    err = _refused(rig, _launch(rig, "solo", "--nodes", "here", "--set", f"port={port}", "--no-wait"))
    assert "port" in err
