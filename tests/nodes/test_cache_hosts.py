"""`c3 cache ls --node` over the real sshd of the test hosts: the same scanner reads the node's own
Hugging Face cache (its `$HOME` is its own folder) through the SSH path `c3 node status` uses, and an
unreachable node is one error line with exit 3."""

from __future__ import annotations

import json
import shutil

from tests.nodes.test_cache import hf_repo
from tests.nodes.test_node_cli import _reachable_and_down


def test_cache_ls_reads_a_node_over_ssh_and_an_unreachable_one_exits_3(ssh_hosts, monkeypatch, tmp_path):
    c3 = _reachable_and_down(ssh_hosts, monkeypatch, tmp_path)
    h1 = ssh_hosts.hosts[0]
    hf_home = h1.folder / "home" / ".cache" / "huggingface"
    hf_repo(hf_home / "hub", "Qwen/Qwen3-8B", {"aaa": 4096, "bbb": 10}, {"r1": {"model.safetensors": "aaa", "config.json": "bbb"}})
    try:
        rows = json.loads(c3.ok("cache", "ls", "--node", "h1", "--json"))["nodes"]
        (row,) = rows
        assert (row["node"], row["local"], row["reachable"], row["error"]) == ("h1", False, True, None)
        assert [(m["name"], m["bytes"], m["revisions"]) for m in row["models"]] == [("Qwen/Qwen3-8B", 4106, ["r1"])]
        assert row["roots"][0]["path"] == str(hf_home / "hub")
        assert "vllm/qwen3-8b" not in {d["slug"] for d in row["not_cached"]}

        both = c3("cache", "ls", "--node", "h1,down", "--json")
        assert both.returncode == 3, (both.returncode, both.stderr)
        by_node = {r["node"]: r for r in json.loads(both.stdout)["nodes"]}
        assert by_node["h1"]["models"] and by_node["down"]["reachable"] is False and by_node["down"]["models"] == []
        down = c3("cache", "ls", "--node", "down")
        assert down.returncode == 3 and "Traceback" not in down.stderr
        assert down.stdout.startswith("down: unreachable: ")
        assert down.stderr.splitlines()[0] == "c3: error: 1 of 1 node(s) unreachable: down"
    finally:
        shutil.rmtree(hf_home, ignore_errors=True)
