"""One port range (backend/limits.py, issue 25): every place that checks a port from a file, a flag or a
form agrees with `limits.is_port` at the edges, in its own words; only the router's and the gateway's own
configs take 0 ("any free port": tests start them on loopback that way)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from backend import limits
from backend.errors import UsageError
from backend.estate.ops import _check_args
from backend.estate.ports import new_pod_port_problem
from backend.gateway.config import GatewayConfig
from backend.models.estate import Pod
from backend.models.names import check_endpoint_url, check_ssh_target
from backend.pool.router import PoolConfig
from backend.recipes.schema import port_problem
from backend.shard.plan import ShardOptions

EDGES = [-1, 0, 1, 8000, 65535, 65536]


def test_a_port_is_an_int_from_1_to_65535():
    assert [limits.is_port(p) for p in EDGES] == [False, False, True, True, True, False]
    assert not any(limits.is_port(v) for v in (True, 80.0, "80", None))


def _accepts(check, port: int) -> bool:
    try:
        check(port)
    except (ValueError, ValidationError, UsageError):  # ValidationError is a ValueError; said for the reader
        return False
    return True


def _said(problem: str | None) -> None:
    if problem is not None:
        raise ValueError(problem)


CHECKS = {
    "recipe override": lambda p: _said(port_problem(p)),
    "new pod form": lambda p: _said(new_pod_port_problem(str(p), {}, is_bound=None)),
    "pod create --port": lambda p: _check_args([0], p),
    "estate pod": lambda p: Pod(name="a", slug="x/y", gpus=(0,), port=p),
    "node URL": lambda p: check_endpoint_url(f"http://h:{p}/v1"),
    "SSH target": lambda p: check_ssh_target(f"u@h:{p}"),
    "shard --port": lambda p: ShardOptions(model="m", api_port=p),
}


@pytest.mark.parametrize("where", sorted(CHECKS))
def test_every_port_check_agrees_with_the_one_range(where):
    assert [_accepts(CHECKS[where], p) for p in EDGES] == [limits.is_port(p) for p in EDGES]


def test_only_the_routers_and_the_gateways_configs_take_any_free_port():
    assert GatewayConfig(port=limits.ANY_PORT).port == 0
    assert PoolConfig(backends=[("a", "http://127.0.0.1:9/v1")], port=limits.ANY_PORT).port == 0
    with pytest.raises(ValidationError):
        GatewayConfig(port=limits.PORT_MAX + 1)
