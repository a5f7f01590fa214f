"""Recipe schema, loading/merging, overrides, known aborts and the rendered plan (no nodes needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from backend.cluster.plan import collect_secrets, render
from backend.errors import Refused, UsageError
from backend.nodes.registry import Node
from backend.recipes import (
    Recipe,
    check_overrides,
    get_recipe,
    load_recipes,
    parse_overrides,
)
from tests.nodes.cluster_helpers import stub_recipe

IMAGE_ID = "sha256:" + "ab" * 32


def _nodes(n=2) -> list[Node]:
    return [Node(name=f"n{i}", host=f"http://10.213.99.{i}:8123", ssh=f"root@10.213.99.{i}") for i in range(1, n + 1)]


def test_builtins_are_valid_and_honest():
    recipes = load_recipes()
    assert recipes, "at least one built-in recipe ships"
    for recipe in recipes.values():
        assert recipe.source_file and "/backend/recipes/data/" in recipe.source_file
        # A built-in either pins its image and cites provenance, or says it is unverified.
        if recipe.verified:
            assert recipe.image_pinned and recipe.provenance and recipe.provenance.source
        if recipe.measured is not None:
            assert recipe.provenance is not None and recipe.provenance.source, recipe.id


def test_verified_needs_pinned_image_provenance_and_numbers():
    data = stub_recipe("x", IMAGE_ID, 8000)
    assert Recipe.model_validate(data).verified
    with pytest.raises(ValidationError, match="pin its image"):
        Recipe.model_validate({**data, "image": "c3-stub:test"})
    with pytest.raises(ValidationError, match="provenance"):
        Recipe.model_validate({**data, "measured": None})
    assert not Recipe.model_validate({**data, "image": "c3-stub:test", "verified": False}).verified
    with pytest.raises(ValidationError, match="port"):
        Recipe.model_validate({**data, "defaults": {}})


def test_user_recipes_merge_over_builtins(tmp_path):
    home = Path(os.environ["C3_HOME"])
    builtin = next(iter(load_recipes().values()))
    (home / "recipes.d").mkdir(parents=True)
    mine = {**stub_recipe(builtin.id, IMAGE_ID, 9000), "title": "mine"}
    (home / "recipes.d" / "a.yaml").write_text(yaml.safe_dump(mine))
    (home / "recipes.d" / "b.yaml").write_text(yaml.safe_dump({"recipes": [stub_recipe("other", IMAGE_ID, 9001)]}))
    recipes = load_recipes()
    assert recipes[builtin.id].title == "mine" and "other" in recipes
    (home / "recipes.d" / "c.yaml").write_text("id: broken\n")
    with pytest.raises(UsageError, match="c.yaml"):
        load_recipes()
    (home / "recipes.d" / "c.yaml").unlink()
    with pytest.raises(Refused, match="no recipe `nope`"):
        get_recipe("nope")


def test_overrides_are_typed_and_known_aborts_refused():
    recipe = Recipe.model_validate(stub_recipe("x", IMAGE_ID, 8000))
    assert parse_overrides(recipe, ["max_model_len=8192", "startup_delay=1.5"]) == {"max_model_len": 8192, "startup_delay": 1.5}
    with pytest.raises(UsageError, match="no parameter `bogus`"):
        parse_overrides(recipe, ["bogus=1"])
    with pytest.raises(UsageError, match="not an integer"):
        parse_overrides(recipe, ["max_model_len=lots"])
    with pytest.raises(UsageError, match="key=value"):
        parse_overrides(recipe, ["max_model_len"])
    check_overrides(recipe, {"max_model_len": 65536})
    with pytest.raises(Refused, match="known to abort on netns-stub"):
        check_overrides(recipe, {"max_model_len": 65537})
    # Rules for other hardware do not apply.
    other = recipe.model_copy(update={"hardware": recipe.hardware.model_copy(update={"id": "elsewhere"})})
    check_overrides(other, {"max_model_len": 10**6})


def test_plan_renders_ranks_and_keeps_secrets_out_of_commands():
    recipe = Recipe.model_validate({**stub_recipe("x", IMAGE_ID, 8000), "env": {"A": "{node_address}", "MY_TOKEN": "t0ps3cret"}})
    secrets = collect_secrets(recipe, {"C3_API_KEY": "sk-shh", "HF_TOKEN": "hf_shh"})
    plan = render(recipe, _nodes(), {"max_model_len": 1024}, secrets=secrets)
    assert plan.base_url == "http://10.213.99.1:8000/v1"
    r0, r1 = plan.ranks
    assert r0.run_argv[:4] == ["docker", "run", "-d", "--name"] and "c3-profile_x" in r0.run_argv
    assert "-e" in r1.run_argv and "A=10.213.99.2" in r1.run_argv
    assert r1.run_argv[r1.run_argv.index("--max-model-len") + 1] == "1024"
    assert r1.run_argv[r1.run_argv.index("--name", 5) + 1] == "x-rank1"
    assert r0.env_file == "~/.c3/run/x-n1.env" and r0.secret_names == ["HF_TOKEN", "MY_TOKEN", "VLLM_API_KEY"]
    text = "\n".join(plan.describe()) + " ".join(" ".join(rp.run_argv) for rp in plan.ranks)
    for secret in ("sk-shh", "hf_shh", "t0ps3cret"):
        assert secret not in text
        assert secret in plan.env_file_text()
    assert "recipe + local overrides" in "\n".join(plan.describe())


def test_plan_refuses_wrong_node_count_and_unpinned_image():
    recipe = Recipe.model_validate(stub_recipe("x", IMAGE_ID, 8000))
    with pytest.raises(Refused, match="runs on 2 node"):
        render(recipe, _nodes(3))
    with pytest.raises(Refused, match="not pinned"):
        render(recipe, _nodes(), {"image": "c3-stub:test"})
    assert render(recipe, _nodes(), {"image": "c3-stub:test"}, allow_unpinned=True).image == "c3-stub:test"
    with pytest.raises(Refused, match="known to abort"):
        render(recipe, _nodes(), {"max_model_len": 10**6})


def test_profile_label():
    from backend.profiles import Profile

    p = Profile(name="x", recipe="x", recipe_digest="d", nodes=["a"], base_url="http://a:1/v1", model="m")
    assert p.status_label(True, "d") == "verified recipe"
    assert p.status_label(False, "d") == "recipe (unverified)"
    assert p.status_label(True, "changed") == "recipe + local overrides"
    assert p.model_copy(update={"overrides": {"k": 1}}).status_label(True, "d") == "recipe + local overrides"


def test_home_relative_volumes_expand_on_the_node():
    from backend.cluster.plan import shell_join

    assert shell_join(["-v", "~/.cache/hf:/root/.cache/hf", "a b"]) == "-v \"$HOME\"/.cache/hf:/root/.cache/hf 'a b'"
    builtin = next(r for r in load_recipes().values() if r.docker.volumes)
    text = "\n".join(render(builtin, _nodes(builtin.nodes), allow_unpinned=True).describe())
    assert '"$HOME"/.cache/huggingface' in text


def test_profile_containers_never_take_a_pods_container_name():
    """On a local node a profile and a pod share one daemon: `docker rm -f` of one must not hit the other."""
    from backend.cluster.plan import container_name as profile_container
    from backend.runtime.docker_adapter import container_name as pod_container

    for name in ("chat", "stub-pair", "a1"):
        assert profile_container(name) != pod_container(name)
        assert "_" in profile_container(name)  # pod names cannot contain `_` (POD_NAME_PATTERN)
