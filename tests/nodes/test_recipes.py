"""Recipe schema, loading/merging, overrides, known aborts and the rendered plan (no nodes needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from backend.cluster.plan import collect_secrets, render
from backend.errors import Refused, UsageError
from backend.recipes import (
    Recipe,
    check_overrides,
    get_recipe,
    load_recipes,
    parse_overrides,
)
from backend.remote.node import Node
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
    recipe = Recipe.model_validate({**stub_recipe("x", IMAGE_ID, 8000), "env": {"A": "{node_address}", "MY_TOKEN": "t0ps3cret"},
                                    "public_env": ["A", "MY_TOKEN"]})
    secrets = collect_secrets(recipe, {"C3_API_KEY": "sk-shh", "HF_TOKEN": "hf_shh"})
    plan = render(recipe, _nodes(), {"max_model_len": 1024}, secrets=secrets)
    assert plan.base_url == "http://10.213.99.1:8000/v1"
    r0, r1 = plan.ranks
    assert r0.run_argv[:4] == ["docker", "run", "-d", "--name"] and "c3-profile_x" in r0.run_argv
    # Unresolved (a dry run): a placeholder that says where the address comes from, never the registry's.
    a1 = next(a for a in r1.run_argv if a.startswith("A="))
    assert "ip route get HEAD on n2" in a1
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


def _facts_run(addrs: dict[str, str], routes: dict[str, str]):
    """A stand-in for the nodes' shells: `ip -o -4 addr` and `ip -o -4 route get` as Linux prints them."""
    async def run(node, script: str) -> str:
        if "route get" in script:
            return f"route={routes[node.name]}\n"
        return "".join(f"addr=2: {iface}    inet {cidr} brd + scope global {iface}\\\n" for iface, cidr in
                       (pair.split("=") for pair in addrs[node.name].split(","))) + "\n"
    return run


def test_rank_addresses_come_from_the_nodes_not_the_registry():
    """A head registered as `root@127.0.0.1` and a worker registered by name: the worker is told the
    head's cluster-link address and its own route's source, never `127.0.0.1` or a name."""
    import asyncio

    from backend.cluster.addresses import resolve

    recipe = Recipe.model_validate({**stub_recipe("x", IMAGE_ID, 8000), "env": {"A": "{node_address}"}, "public_env": ["A"],
                                    "command": ["--master-addr", "{head_address}"]})
    nodes = [Node(name="head", host="http://127.0.0.1:8000", ssh="root@127.0.0.1"),
             Node(name="spark2", host="http://spark2:8000", ssh="coder@spark2")]
    run = _facts_run({"head": "eth0=192.168.1.10/24,enp1s0f1np1=169.254.10.1/16", "spark2": "eth0=192.168.1.11/24,enp1s0f1np1=169.254.10.2/16"},
                     {"spark2": "192.168.1.10 dev eth0 src 192.168.1.11 uid 0 \\    cache"})
    group = asyncio.run(resolve(nodes, run))
    plan = render(recipe, nodes, addresses=group)
    worker = plan.ranks[1].run_argv
    assert worker[worker.index("--master-addr") + 1] == "192.168.1.10"
    assert "VLLM_HOST_IP=192.168.1.11" in worker and "NCCL_SOCKET_IFNAME=eth0" in worker and "A=192.168.1.11" in worker
    assert "VLLM_HOST_IP=192.168.1.10" in plan.ranks[0].run_argv
    assert not any("127.0.0.1" in a or "spark2" in a for a in worker)


def test_a_head_with_only_loopback_is_refused_with_the_reason():
    import asyncio

    from backend.cluster.addresses import refuse_loopback_head, resolve

    nodes = [Node(name="head", host="http://127.0.0.1:8000", ssh="root@127.0.0.1"),
             Node(name="w", host="http://10.0.0.2:8000", ssh="root@10.0.0.2")]
    with pytest.raises(Refused, match="no usable IPv4 address"):
        asyncio.run(resolve(nodes, _facts_run({"head": "docker0=172.17.0.1/16", "w": "eth0=10.0.0.2/24"}, {})))
    with pytest.raises(Refused, match="would dial 127.0.0.1 on their own machine"):
        refuse_loopback_head("127.0.0.1", nodes[0], nodes[1:])
    refuse_loopback_head("127.0.0.1", nodes[0], [])  # one node: loopback is fine


def test_secrets_by_value_and_by_default():
    """Recipe env is secret unless public; a public name whose value or name looks like a credential
    stays secret: it reaches the node only in the env file, never argv or the dry run."""
    env = {"HTTPS_PROXY": "http://bob:hunter2pw@proxy.lan:3128", "NCCL_DEBUG": "INFO", "REGISTRY_PASS": "pa55word",
           "MY_AUTH": "opaque-value-1", "NOTE": "not-listed-public", "EXTRA": "hf_abcdefghijklmnopqrstu"}
    recipe = Recipe.model_validate({**stub_recipe("x", IMAGE_ID, 8000), "env": env,
                                    "public_env": ["HTTPS_PROXY", "NCCL_DEBUG", "REGISTRY_PASS", "MY_AUTH", "EXTRA"]})
    plan = render(recipe, _nodes())
    shown = "\n".join(plan.describe()) + " ".join(" ".join(rp.run_argv) for rp in plan.ranks)
    assert "NCCL_DEBUG=INFO" in shown
    for value in ("hunter2pw", "pa55word", "opaque-value-1", "not-listed-public", "hf_abcdefghijklmnopqrstu"):
        assert value not in shown
        assert value in plan.env_file_text()
    assert "HTTPS_PROXY=<redacted>" in shown and "NOTE=<redacted>" in shown

    from backend.shard.plan import split_env

    shown_env, secret = split_env(env, ["HTTPS_PROXY", "NCCL_DEBUG", "REGISTRY_PASS"])
    assert shown_env == {"NCCL_DEBUG": "INFO"} and set(secret) == set(env) - {"NCCL_DEBUG"}


def test_every_builtin_renders_and_cites_its_run():
    """Each built-in recipe renders to the command it documents (a `{` in a JSON flag must be escaped
    as `{{`), and the command carries JSON flags through intact; verified ones cite a source and a digest."""
    import json as _json

    recipes = load_recipes()
    assert len(recipes) >= 8
    for recipe in recipes.values():
        plan = render(recipe, _nodes(recipe.nodes), allow_unpinned=True)
        argv = plan.ranks[0].run_argv
        for i, word in enumerate(argv):
            if word == "--speculative-config":
                assert _json.loads(argv[i + 1])["num_speculative_tokens"] >= 1
        if recipe.verified:
            assert recipe.image_pinned and recipe.provenance.source.startswith("https://github.com/"), recipe.id
