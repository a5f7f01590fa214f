"""Swap by fit: on-demand pods share GPUs; the gateway stops one to start another, never a pod with
requests in flight, never one not on demand, never one inside its minimum residency (issue 28)."""

from __future__ import annotations

from backend.actions.boot_pods import BootPods
from tests.estate.cli import run_inproc

from .conftest import create


def test_c3_up_refuses_two_on_demand_pods_that_collide(ws):
    create(ws, "chat", 0, on_demand=True)
    create(ws, "coder", 0, on_demand=True)
    create(ws, "other", 1)
    r = run_inproc("up", "--file", str(ws.estate_path))
    assert r.code == 1, (r.out, r.err)
    assert "pods chat and coder share GPU 0" in r.err and "gateway" in r.err
    assert not any(ws.ctx.runtime.workload(n).running for n in ("chat", "coder", "other"))  # refused before anything starts
    # One of them boots; then `up` of both refuses again (coder would collide with the running chat).
    assert run_inproc("up", "--only", "chat,other", "--file", str(ws.estate_path)).code == 0
    again = run_inproc("up", "--file", str(ws.estate_path))
    assert again.code == 1 and "pods chat and coder share GPU 0" in again.err and "--only coder" not in again.err
    assert not ws.ctx.runtime.workload("coder").running
    assert BootPods(ws, ("chat", "coder")).problems()[0].message.startswith("pods chat and coder share GPU 0")
