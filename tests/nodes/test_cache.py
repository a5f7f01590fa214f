"""`c3 cache ls` on this machine: a Hugging Face hub cache built in tmp the way huggingface_hub lays it
out (blobs, snapshots linking into them, refs), plain model folders, and hostile trees (symlink loops,
a tree far larger than the scan's bounds)."""

from __future__ import annotations

import csv
import json
import os
import time
from pathlib import Path

from tests.nodes.cluster_helpers import C3Runner

ROOT = Path(__file__).resolve().parents[2]


def hf_repo(hub: Path, repo: str, blobs: dict[str, int], snapshots: dict[str, dict[str, str]], ref: str | None = None) -> Path:
    """`models--ORG--NAME` as huggingface_hub writes it: each blob once, each snapshot file a relative link to its blob."""
    folder = hub / ("models--" + repo.replace("/", "--"))
    (folder / "blobs").mkdir(parents=True)
    for name, size in blobs.items():
        (folder / "blobs" / name).write_bytes(b"w" * size)
    for revision, files in snapshots.items():
        (folder / "snapshots" / revision).mkdir(parents=True)
        for filename, blob in files.items():
            os.symlink(f"../../blobs/{blob}", folder / "snapshots" / revision / filename)
    if ref:
        (folder / "refs").mkdir()
        (folder / "refs" / "main").write_text(ref)
    return folder


def weights_row(model: str, variant: str) -> int:
    with (ROOT / "backend/catalog/models/weights.csv").open(newline="") as fh:
        return next(int(r["total_bytes"]) for r in csv.DictReader(fh) if r["model"] == model and r["variant"] == variant)


def test_cache_ls_counts_each_blob_once_and_prices_what_is_missing(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    hub = home / ".cache/huggingface/hub"
    # Two revisions share the weights blob: on disk it is there once (1000 + 24 + an unfinished 50,
    # and refs/main's 4 bytes).
    hf_repo(hub, "Qwen/Qwen3-8B", {"aaa": 1000, "bbb": 24, "ccc.incomplete": 50},
            {"rev1": {"model.safetensors": "aaa", "config.json": "bbb"}, "rev2": {"model.safetensors": "aaa"}}, ref="rev2")
    (hub / "datasets--x--y" / "blobs").mkdir(parents=True)
    (hub / "datasets--x--y" / "blobs" / "d").write_bytes(b"d" * 500)
    (hub / ".locks").mkdir()
    models = tmp_path / "models"
    (models / "Qwen3-32B-GGUF").mkdir(parents=True)
    (models / "Qwen3-32B-GGUF" / "qwen3-32b-q4_k_m.gguf").write_bytes(b"g" * 300)
    (models / "notes").mkdir()
    (models / "notes" / "readme.txt").write_text("not a model")
    (models / "lone.gguf").write_bytes(b"g" * 70)
    os.link(models / "lone.gguf", models / "Qwen3-32B-GGUF" / "hardlink.gguf")

    c3 = C3Runner()
    result = c3("cache", "ls", "--path", str(models), "--json", env={"HOME": str(home)})
    assert result.returncode == 0, result.stderr
    (node,) = json.loads(result.stdout)["nodes"]
    assert node["node"] is None and node["local"] and node["reachable"] and node["cut"] is None
    found = {m["name"]: m for m in node["models"]}
    assert set(found) == {"Qwen/Qwen3-8B", "Qwen3-32B-GGUF", "lone.gguf"}
    qwen = found["Qwen/Qwen3-8B"]
    assert (qwen["kind"], qwen["bytes"], qwen["incomplete_bytes"], qwen["revisions"]) == ("hf", 1078, 50, ["rev1", "rev2"])
    assert {"vllm/qwen3-8b", "sglang/qwen3-8b"} <= set(qwen["slugs"])
    assert (found["Qwen3-32B-GGUF"]["kind"], found["Qwen3-32B-GGUF"]["bytes"]) == ("folder", 370)
    assert (found["lone.gguf"]["kind"], found["lone.gguf"]["bytes"]) == ("file", 70)
    # The hard link is one file: counted in each model that holds it, once in the node's total.
    assert node["total_bytes"] == 1078 + 370
    assert node["roots"][0]["path"] == str(hub)
    missing = {d["slug"]: d for d in node["not_cached"]}
    assert "vllm/qwen3-8b" not in missing and "sglang/qwen3-8b" not in missing
    assert missing["vllm/qwen3-32b-tp2"]["bytes"] == weights_row("Qwen/Qwen3-32B", "bf16")
    assert missing["vllm/qwen3-32b-tp2"]["source"].startswith("weights.csv bf16")

    text = c3("cache", "ls", "--path", str(models), env={"HOME": str(home)})
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith("this machine: 3 model(s), 0.00 GiB")
    assert any(line.split()[:1] == ["Qwen/Qwen3-8B"] and "vllm/qwen3-8b" in line and "unfinished" in line for line in lines)
    assert any("not cached (" in line for line in lines) and lines[-1].lstrip().startswith("… ")


def test_loops_and_huge_trees_end_quickly_and_say_so(tmp_path):
    from backend.nodes.cache_scan import scan

    hub = tmp_path / "hub"
    repo = hf_repo(hub, "org/looped", {"aaa": 10}, {"r": {"w.safetensors": "aaa"}})
    snap = repo / "snapshots" / "r"
    os.symlink("self", snap / "self")            # a link to itself
    os.symlink("../..", snap / "up")             # a folder link back up the tree
    os.symlink("nowhere", snap / "dangling")
    loop_root = tmp_path / "loop"
    os.symlink(loop_root, loop_root)             # a root that is its own link
    started = time.monotonic()
    result = scan([str(hub), str(loop_root)])
    assert time.monotonic() - started < 5
    looped = result["roots"][0]["models"][0]
    assert (looped["name"], looped["bytes"], looped["broken_links"]) == ("org/looped", 10, 2)
    assert result["roots"][1]["exists"] is False and "symbolic links" in result["roots"][1]["error"].lower()

    big = tmp_path / "big"
    repo = hf_repo(big, "org/huge", {}, {})
    for i in range(60):
        deep = repo / "blobs" / "/".join(f"d{j}" for j in range(i % 15))
        deep.mkdir(parents=True, exist_ok=True)
        for k in range(40):
            (deep / f"f{i}-{k}").write_bytes(b"x")
    cut = scan([str(big)], {"max_entries": 500})
    assert cut["cut"] == "entries" and cut["roots"][0]["models"][0]["partial"] is True
    assert 0 < cut["roots"][0]["models"][0]["bytes"] < 500
    shallow = scan([str(big)], {"max_depth": 3})
    assert shallow["cut"] is None and shallow["roots"][0]["models"][0]["partial"] is True
    late = scan([str(big)], {"deadline_s": 0})
    assert late["cut"] == "time"


def test_a_registered_local_node_is_read_directly_and_an_unknown_one_refused(tmp_path, monkeypatch):
    home = tmp_path / "home"
    hf_repo(home / ".cache/huggingface/hub", "Qwen/Qwen3-8B", {"aaa": 5}, {"r": {"w.safetensors": "aaa"}})
    c3 = C3Runner()
    env = {"HOME": str(home)}
    c3.ok("node", "add", "here", "--host", "http://127.0.0.1:8000", "--ssh", "nobody@198.51.100.7", "--local", env=env)
    rows = json.loads(c3.ok("cache", "ls", "--node", "here", "--json", env=env))["nodes"]
    assert [(r["node"], r["local"], [m["bytes"] for m in r["models"]]) for r in rows] == [("here", True, [5])]
    unknown = c3("cache", "ls", "--node", "nope", env=env)
    assert unknown.returncode == 1 and unknown.stderr.startswith("c3: error: node(s) not registered: nope")
