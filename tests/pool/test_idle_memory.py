"""An idle keep-alive client connection costs the router at most 2 KiB (issue 26): measured as RSS growth
over 1,000 idle connections to a real router process on loopback (`bench/pool_idle_conns.py`)."""

from __future__ import annotations

import importlib.util

import pytest

from tests.pool.conftest import ROOT


def _bench():
    spec = importlib.util.spec_from_file_location("pool_idle_conns", ROOT / "bench" / "pool_idle_conns.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_an_idle_connection_costs_at_most_2_kib(loop):
    per_conn = _bench().one_round(loop, 1000)
    print(f"{loop}: {per_conn:.2f} KiB per idle connection")
    assert per_conn <= 2.0, f"{loop}: {per_conn:.2f} KiB per idle connection (6.5 before connections parked)"
