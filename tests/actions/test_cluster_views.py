"""The cluster reads as named queries with typed results (`backend/views/`): the documented `--json`
shapes, and what each query answers on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from backend.errors import UsageError
from backend.views.profiles import ProfileList, ProfileSummary, active_profile, profile_env, profile_list
from backend.views.recipes import RecipeCard, RecipeSummary, override_problems, recipe_cards, recipe_detail, recipe_list
from tests.actions.test_views import _fields, _shape
from tests.nodes.cluster_helpers import stub_recipe


def test_recipe_and_profile_lists_are_the_documented_shapes():
    recipes = _shape("c3 recipes list")
    row = recipes[recipes.index("[{"):]
    assert _fields(row) == list(RecipeSummary.model_fields)
    profiles = _shape("c3 profile ls")
    inner = profiles[profiles.index("[{"):]
    assert _fields(profiles[: profiles.index("[{")]) == list(ProfileList.model_fields)
    assert _fields(inner) == list(ProfileSummary.model_fields)
    for model in (RecipeSummary, RecipeCard, ProfileList, ProfileSummary):
        undocumented = [name for name, field in model.model_fields.items() if not field.description]
        assert undocumented == [], (model.__name__, undocumented)


def _write_recipe() -> None:
    folder = Path(os.environ["C3_HOME"]) / "recipes.d"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stub.yaml").write_text(yaml.safe_dump({"recipes": [stub_recipe("stub-pair", "sha256:" + "0" * 64, 18000)]}))


def test_recipe_queries_read_the_users_recipes():
    _write_recipe()
    [summary] = [r for r in recipe_list() if r.id == "stub-pair"]
    assert (summary.hardware_id, summary.nodes, summary.engine) == ("netns-stub", 2, "custom")
    [card] = [c for c in recipe_cards() if c.id == "stub-pair"]
    assert card.measured == ["decode 1234.0 tok/s (1 stream)", "at concurrency 1"] and card.provenance == "c3 test suite on netns test hosts"
    assert recipe_detail("stub-pair").defaults["port"] == 18000
    bad = override_problems("stub-pair", ("max_model_len=100000", "max_model_len=2048", "nonsense"))
    assert len(bad) == 2 and "65536" in bad[0]
    assert override_problems("no-such-recipe", ())[0].startswith("no recipe")


def test_profile_queries_label_and_refuse_a_hostile_key_name():
    from backend.profiles import Profile, save_profile, set_active
    from backend.recipes import get_recipe

    assert profile_list() == ProfileList(active=None, profiles=[]) and active_profile() is None
    _write_recipe()
    digest = get_recipe("stub-pair").digest()
    save_profile(Profile(name="pair", recipe="stub-pair", recipe_digest=digest, nodes=["a", "b"], base_url="http://x:1/v1", model="stub"))
    save_profile(Profile(name="gone", recipe="deleted", recipe_digest="d", nodes=["a"], base_url="http://y:1/v1", model="m",
                         api_key_env="X}$(touch /tmp/pwned)"))
    set_active("pair")
    listing = profile_list()
    assert listing.active == "pair" and [(p.name, p.status, p.active) for p in listing.profiles] == [
        ("gone", "recipe missing", False), ("pair", "verified recipe", True)]
    assert active_profile() == listing.profiles[1]
    assert profile_env(None).base_url == "http://x:1/v1"
    with pytest.raises(UsageError):
        profile_env("gone")
