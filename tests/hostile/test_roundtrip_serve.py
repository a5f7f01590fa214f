"""Issue 16, continued: estate files round-trip, automatic ports wrap, `c3 serve` asks as the seed
does, the cockpit takes `--file`, and a sim pod under `VLLM_API_KEY` becomes ready."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from backend.estate.ports import default_port
from backend.models.estate import Estate, Pod
from tests.hostile.helpers import run

CLUB = """\
# club-3090 estate — edited by hand, keep these notes
schema_version: 1
created: 2026-05-14T00:00:00Z
estate:
  # the daily driver
  - name: chat
    compose: vllm/qwen3-8b   # fast
    gpus: [0]
    port: 28120
  - name: spare
    compose: vllm/qwen3-8b
    gpus: [1]
    port: 28121
"""
RIG = 'gpus:\n' + '  - {name: "NVIDIA GeForce RTX 3090", total_mib: 24576, sm: "8.6", reserved_mib: 422}\n' * 3


@pytest.fixture
def rig(tmp_path: Path, monkeypatch) -> Path:
    from tests.support import use_rig

    return use_rig(tmp_path, monkeypatch, RIG)


def test_pod_create_and_rm_keep_comments_order_and_compose(tmp_path, rig):
    path = tmp_path / "estate.yml"
    path.write_text(CLUB)
    r = run("pod", "create", "third", "--gpus", "2", "--slug", "vllm/qwen3-8b", "--port", "28122", "--force", "--file", str(path))
    assert r.rc == 0, r.err
    text = path.read_text()
    for kept in ("# club-3090 estate — edited by hand, keep these notes", "# the daily driver", "compose: vllm/qwen3-8b   # fast"):
        assert kept in text
    doc = yaml.safe_load(text)
    assert list(doc) == ["schema_version", "created", "estate"]
    assert [(p["name"], p.get("compose"), "slug" in p) for p in doc["estate"]] == [
        ("chat", "vllm/qwen3-8b", False), ("spare", "vllm/qwen3-8b", False), ("third", "vllm/qwen3-8b", False)]
    r = run("pod", "rm", "spare", "--file", str(path))
    assert r.rc == 0, r.err
    text = path.read_text()
    assert "# the daily driver" in text and "compose: vllm/qwen3-8b   # fast" in text and "spare" not in text
    assert [p["name"] for p in yaml.safe_load(text)["estate"]] == ["chat", "third"]


def test_automatic_ports_wrap_past_65535():
    estate = Estate(pods=[Pod(name=f"p{i}", slug="vllm/x", gpus=(0,), port=1024 + i) for i in range(3000)])
    port = default_port(estate, 8020, is_bound=None)  # 8020 + 20 × 3000 = 68020 > 65535
    assert 1024 <= port <= 65535 and port not in {p.port for p in estate.pods}


class FakeCatalog:
    def __init__(self, *entries):
        self.entries = list(entries)


def _entry(slug: str, tp: int, model: str = "org/m"):
    from backend.models.catalog import CatalogEntry

    return CatalogEntry(slug=slug, engine="vllm", image="img:1", model=model, tp=tp)


def _ctx(catalog, n: int):
    from backend.models.gpu import Gpu

    gpus = [Gpu(index=i, uuid=f"GPU-{i}", name="RTX 3090", total_mib=24576) for i in range(n)]
    runtime = SimpleNamespace(workloads=lambda: {})
    return SimpleNamespace(catalog=catalog, gpus=lambda: gpus, processes=lambda: [], runtime=runtime)


def test_serve_asks_each_gpu_or_both_and_maps_both_to_the_tp2_variant():
    from c3.cli.serve import choose

    one, two = _entry("vllm/m", 1), _entry("vllm/m-tp2", 2)
    asked = []

    def answer(reply):
        return lambda question, default: asked.append((question, default)) or reply

    entry, gpus = choose(_ctx(FakeCatalog(one, two), 2), one, None, interactive=True, ask=answer(""))
    assert asked[-1] == ("Use GPU 0, GPU 1, or both?", "both")
    entry, gpus = choose(_ctx(FakeCatalog(one, two), 2), one, None, interactive=True, ask=answer("both"))
    assert (entry.slug, gpus) == ("vllm/m-tp2", [0, 1])
    entry, gpus = choose(_ctx(FakeCatalog(one, two), 2), one, None, interactive=True, ask=answer("1"))
    assert (entry.slug, gpus) == ("vllm/m", [1])
    entry, gpus = choose(_ctx(FakeCatalog(one, two), 3), one, None, interactive=True, ask=answer("0,2"))
    # no TP=3 variant: "all" is not offered, yet two indices still pick the TP=2 variant
    assert asked[-1][0] == "Serve on which 1 GPU(s)? (indices such as 0)" and (entry.slug, gpus) == ("vllm/m-tp2", [0, 2])
    # scripts answer with --gpus: two GPUs for a TP=1 slug pick its TP=2 variant
    assert choose(_ctx(FakeCatalog(one, two), 3), one, "0,1", interactive=False)[0].slug == "vllm/m-tp2"


def test_serve_says_when_no_variant_exists_for_all_together():
    from backend.errors import UsageError
    from c3.cli.serve import choose

    one = _entry("vllm/m", 1)
    with pytest.raises(UsageError, match="no TP=3 variant of org/m"):
        choose(_ctx(FakeCatalog(one), 3), one, None, interactive=True, ask=lambda q, d: "all")
    # without a variant the default is the slug's own GPU count, not "all"
    seen = []
    entry, gpus = choose(_ctx(FakeCatalog(one), 3), one, None, interactive=True, ask=lambda q, d: seen.append(d) or d)
    assert seen == ["0"] and (entry.slug, gpus) == ("vllm/m", [0])


def test_serve_never_offers_both_without_a_variant_and_asks_again_on_a_wrong_answer():
    """Issue 25: `c3 serve` offered "or both?" when it could not do both, and `both` then exited 2."""
    from c3.cli.serve import choose

    one = _entry("vllm/m", 1)
    asked, replies = [], iter(["both", "7", "1"])
    entry, gpus = choose(_ctx(FakeCatalog(one), 2), one, None, interactive=True,
                         ask=lambda q, d: asked.append((q, d)) or next(replies))
    assert asked[0] == ("Use GPU 0 or GPU 1?", "0") and "both" not in asked[0][0]
    assert len(asked) == 3 and (entry.slug, gpus) == ("vllm/m", [1])
    asked.clear()
    choose(_ctx(FakeCatalog(one), 3), one, None, interactive=True, ask=lambda q, d: asked.append(q) or d)
    assert asked == ["Serve on which 1 GPU(s)? (indices such as 0)"]


def test_cockpit_takes_file_like_the_cli(tmp_path, monkeypatch):
    import c3.cli.cockpit as cockpit
    from tests.estate.cli import run_inproc

    seen = {}
    monkeypatch.setattr(cockpit, "run_cockpit", lambda **kw: seen.update(kw))
    path = tmp_path / "other.yml"
    path.write_text("schema_version: 1\nestate: []\n")
    assert run_inproc("--file", str(path)).code == 0 and seen["estate_path"] == path
    bad = run_inproc("--file", "/dev/zero")
    assert bad.code == 2 and "not a regular file" in bad.err


def test_cockpit_services_read_the_file_given(tmp_path, rig):
    from c3.services_real import build_services

    path = tmp_path / "other.yml"
    path.write_text("schema_version: 1\nestate:\n  - {name: elsewhere, slug: vllm/qwen3-8b, gpus: [0], port: 28130}\n")
    services = build_services(estate_path=path)
    try:
        assert services.path == path
        assert [p.name for p in services.pod_states()] == ["elsewhere"]
    finally:
        getattr(services, "close", lambda: None)()


def test_a_sim_pod_under_vllm_api_key_becomes_ready(tmp_path, rig):
    from tests.support import free_port

    home = Path(os.environ["C3_HOME"])
    (home / "catalog.d").mkdir(parents=True)
    (home / "catalog.d" / "stub.yaml").write_text(yaml.safe_dump({"entries": [{
        "slug": "custom/stub", "engine": "custom", "image": "c3-stub:test", "container_port": 8000, "health_path": "/v1/models",
        "command": ["python3", "/opt/c3/stub_engine.py", "--port", "8000"], "tp": 1}]}))
    port = free_port()
    (home / "estate.yml").write_text(f"schema_version: 1\nestate:\n  - {{name: keyed, slug: custom/stub, gpus: [0], port: {port}}}\n")
    try:
        up = run("pod", "up", "keyed", "--timeout", "40", env={"VLLM_API_KEY": "sk-test-123"}, deadline=60)
        assert up.rc == 0 and "✓ serving" in up.out, up.out + up.err
        assert "sk-test-123" not in up.out + up.err
    finally:
        run("pod", "down", "keyed", deadline=60)
    # Without the key in c3's environment the engine (started with one in its own) says 401: auth, at once.
    (home / "catalog.d" / "stub.yaml").write_text(yaml.safe_dump({"entries": [{
        "slug": "custom/stub", "engine": "custom", "image": "c3-stub:test", "container_port": 8000, "health_path": "/v1/models",
        "command": ["python3", "/opt/c3/stub_engine.py", "--port", "8000", "--api-key", "sk-engine"], "tp": 1}]}))
    try:
        up = run("pod", "up", "keyed", "--timeout", "300", deadline=60)
        assert up.rc == 1 and "requires an API key" in up.error_line() and up.seconds < 60
        assert "sk-engine" not in up.err
    finally:
        run("pod", "down", "keyed", deadline=60)
