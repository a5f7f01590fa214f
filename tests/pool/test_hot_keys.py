"""Hot-key flag: one sticky key carrying most of a backend's recent traffic shows up in `pool status`
(human and --json), as a salted hash only."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx

from backend.pool.router import PoolConfig, Router
from tests.pool.conftest import ROOT, chat

API_KEY = "sk-hot-9f8e7d6c5b4a39281706"


def test_one_api_key_is_flagged_hot_by_hash_only(stubs, pool_process):
    backends = stubs("a", "b", extra=("--tokens", "1"))
    pool = pool_process({n: s.url for n, s in backends.items()}, "--sticky", "authorization")
    with httpx.Client(base_url=pool.url, timeout=20) as client:
        spread = {chat(client, {"Authorization": f"Bearer sk-other-{i}"}).headers["x-c3-backend"] for i in range(30)}
        assert spread == {"a", "b"}
        assert pool.status()["hot_keys"] == []  # 30 keys with one request each: nothing hot
        served = {chat(client, {"Authorization": f"Bearer {API_KEY}"}).headers["x-c3-backend"] for _ in range(60)}
    assert len(served) == 1
    (home,) = served

    out = subprocess.run([sys.executable, "-m", "c3", "pool", "status", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    hot = json.loads(out.stdout)["hot_keys"]
    assert len(hot) == 1 and hot[0]["backend"] == home and hot[0]["share"] > 0.5
    assert hot[0]["pool"].endswith(f":{pool.port}") and len(hot[0]["key_hash"]) == 16
    human = subprocess.run([sys.executable, "-m", "c3", "pool", "status"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert human.returncode == 0 and f"hot key {hot[0]['key_hash']} on {home}" in human.stdout
    for text in (out.stdout, human.stdout, pool.log()):
        assert API_KEY not in text and API_KEY[3:] not in text


def test_hot_key_needs_both_share_and_minimum():
    router = Router(PoolConfig(backends=[("a", "http://127.0.0.1:1"), ("b", "http://127.0.0.1:2")], hot_key_window=100, hot_key_min=20))
    recent = router.backends["a"].metrics.keys
    recent.extend([None] * 55 + ["k1"] * 45)  # 45 %: not hot
    assert router.hot_keys() == []
    recent.extend(["k1"] * 10)  # the window keeps the last 100 (10 unkeyed ones drop out): 55 %
    assert router.hot_keys() == [{"key_hash": "k1", "backend": "a", "share": 0.55, "requests": 55, "window": 100}]
    small = Router(PoolConfig(backends=[("a", "http://127.0.0.1:1")], hot_key_min=20))
    small.backends["a"].metrics.keys.extend(["k2"] * 19)  # 100 % but only 19 requests
    assert small.hot_keys() == []
