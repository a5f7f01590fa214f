"""Base URLs from a host and a port (IPv6 in brackets, zone ids that are interface names), env-file
values that cannot add a line, and recipe override fractions that are finite (issue 25)."""

from __future__ import annotations

import pytest

from backend.errors import UsageError
from tests.nodes.cluster_helpers import HF_SECRET, stub_recipe

IMAGE = "c3/stub@sha256:" + "a" * 64


@pytest.mark.parametrize(("host", "url"), [
    ("::1", "http://[::1]:8000/v1"),
    ("[fd00::2]", "http://[fd00::2]:8000/v1"),
    ("fe80::1%eth0", "http://[fe80::1%25eth0]:8000/v1"),
    ("fe80::1%25enp1s0", "http://[fe80::1%25enp1s0]:8000/v1"),
    ("10.0.0.1", "http://10.0.0.1:8000/v1"),
    ("spark-1.lan", "http://spark-1.lan:8000/v1"),
])
def test_host_url_brackets_ipv6_and_escapes_the_zone(host, url):
    from backend.models.names import host_url

    assert host_url(host, 8000, path="/v1") == url


@pytest.mark.parametrize("host", ["fe80::1%eth 0", "fe80::1%a/b", "fe80::1%", "fe80::1%0123456789abcdef", "10.0.0.1%eth0", "a\nb", ""])
def test_host_url_refuses_what_is_no_host(host):
    from backend.models.names import host_url

    with pytest.raises(ValueError):
        host_url(host, 8000)


@pytest.mark.parametrize("url", ["http://[fe80::1%25eth%200]:8000", "http://[fe80::1%25a;b]:8000", "http://[fe80::1%25]:8000"])
def test_a_node_url_with_a_free_text_zone_is_refused(url):
    from backend.models.names import check_endpoint_url

    with pytest.raises(ValueError):
        check_endpoint_url(url)


def _render(host: str, secrets: dict[str, str] | None = None, env: dict[str, str] | None = None):
    from backend.cluster.plan import render
    from backend.recipes import Recipe
    from backend.remote.node import Node

    recipe = Recipe.model_validate({**stub_recipe("solo", IMAGE, 18123), "nodes": 1, "env": env or {}})
    return render(recipe, [Node(name="n1", host=host, ssh="u@10.0.0.1")], secrets=secrets)


@pytest.mark.parametrize(("host", "base"), [("http://[fd00::2]:1", "http://[fd00::2]:18123/v1"),
                                            ("http://[fe80::1%25eth0]:1", "http://[fe80::1%25eth0]:18123/v1"),
                                            ("http://10.0.0.1:1", "http://10.0.0.1:18123/v1")])
def test_a_profile_base_url_keeps_the_brackets_of_an_ipv6_node(host, base):
    assert _render(host).base_url == base


def test_the_router_admin_url_of_an_ipv6_bind_has_brackets():
    from backend.actions.drain_pool_node import find_router
    from backend.models.names import host_url
    from backend.pool.status import admin_host

    assert host_url(admin_host("::"), 8011) == "http://[::1]:8011"
    assert host_url(admin_host("fd00::5"), 8011) == "http://[fd00::5]:8011"
    router = find_router("fd00::5", 8011)
    assert router.admin_url == "http://[fd00::5]:8011" and router.bind == "[fd00::5]:8011"


def test_a_shard_api_url_keeps_the_brackets_of_an_ipv6_head():
    from backend.shard.models import ShardPlan

    plan = ShardPlan(backend="mp", model="m", head="h", head_address="fd00::1", head_port=29500, api_port=8000, tp=1, pp=1, parts=[], tag="t")
    assert plan.api_url == "http://[fd00::1]:8000/v1"
    assert plan.model_copy(update={"head_address": "<head address>"}).api_url == "http://<head address>:8000/v1"  # a dry run's placeholder


@pytest.mark.parametrize("bad", ["\n", "\r", "\x00"])
def test_an_env_file_value_with_a_line_break_or_nul_is_refused_by_name(bad):
    value = f"{HF_SECRET}{bad}LD_PRELOAD=/tmp/evil.so"
    for kwargs in ({"secrets": {"HF_TOKEN": value}}, {"env": {"EXTRA_TOKEN": value}}):
        with pytest.raises(UsageError) as info:
            _render("http://10.0.0.1:1", **kwargs)
        text = info.value.message + (info.value.hint or "")
        assert "line break or NUL" in text and HF_SECRET not in text and "evil" not in text


def test_a_shard_secret_with_a_line_break_is_refused(monkeypatch):
    from backend.shard import ops
    from backend.shard.plan import ShardOptions

    monkeypatch.setenv("HF_TOKEN", HF_SECRET + "\nLD_PRELOAD=/tmp/evil.so")  # settings are read from the environment
    with pytest.raises(UsageError, match="HF_TOKEN holds a line break"):
        ops.collect_secrets(ShardOptions(model="m"))


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e999", "0", "1.5", "-0.1"])
def test_a_memory_fraction_override_outside_0_1_or_not_finite_is_refused(value):
    from backend.recipes import Recipe, parse_overrides

    recipe = Recipe.model_validate({**stub_recipe("solo", IMAGE, 18123), "nodes": 1,
                                    "defaults": {"port": 18123, "max_model_len": 4096, "gpu_memory_utilization": 0.9, "startup_delay": 0.3}})
    with pytest.raises(UsageError, match="gpu_memory_utilization"):
        parse_overrides(recipe, [f"gpu_memory_utilization={value}"])
    with pytest.raises(UsageError, match="not a finite number"):
        parse_overrides(recipe, ["startup_delay=nan"])
    assert parse_overrides(recipe, ["gpu_memory_utilization=0.85"]) == {"gpu_memory_utilization": 0.85}
