"""The module's shared stub engines (`shared_stubs`) are handed to each test as a fresh one would be:
the same process, its request records cleared; one that died is started again."""

from __future__ import annotations

import signal

import httpx

from tests.pool.conftest import stub_records


def test_a_kept_stub_comes_back_with_no_records_and_a_dead_one_is_replaced(shared_stubs, _module_stubs):
    first = shared_stubs("a", extra=("--tokens", "1"))["a"]
    httpx.get(first.url + "/v1/models", timeout=5).raise_for_status()
    assert [r["path"] for r in stub_records(first.url)["requests"]] == ["/v1/models"]
    starts = _module_stubs.starts
    again = shared_stubs("a", extra=("--tokens", "1"))["a"]
    assert again is first and _module_stubs.starts == starts, "a live stub was not kept"
    assert stub_records(again.url)["requests"] == [], "the next test would read the last one's traffic"
    assert shared_stubs("a")["a"] is not first, "other flags must be another engine"
    first.popen.send_signal(signal.SIGKILL)
    first.wait_exit()
    replaced = shared_stubs("a", extra=("--tokens", "1"))["a"]
    assert replaced is not first and replaced.alive() and httpx.get(replaced.url + "/health", timeout=5).status_code == 200
