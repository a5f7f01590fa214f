"""research-club3090.md §6 scenarios 1–14 that need no container, at the backend API, with our slugs.

Every refusal also checks the file is byte-identical afterwards (nothing written on failure).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from backend.errors import Refused, UsageError
from backend.estate import check_estate, create_pod, load_estate, parse_document, remove_pod, validate_estate
from backend.models.estate import Estate, Pod
from tests.estate.fakes import RTX3090, RTX5090, FakeCatalog, fake_fit, probe

CAT = FakeCatalog()


@pytest.fixture
def estate_path(tmp_path: Path) -> Path:
    return tmp_path / "estate.yml"


def make(path, name, gpus, slug, *, rig=(RTX3090, RTX3090, RTX3090, RTX3090), port=None, force=False):
    return create_pod(path, name, gpus, slug, gpus=probe(*rig).gpus(), catalog=CAT, port=port, force=force, fit=fake_fit, is_bound=None)


def refused(path: Path, *args, exc=Refused, **kw) -> str:
    before = path.read_bytes() if path.exists() else None
    with pytest.raises(exc) as info:
        make(path, *args, **kw)
    after = path.read_bytes() if path.exists() else None
    assert after == before, "a refused create must not change the file"
    return info.value.message


def test_1_create_tp1_on_a_free_gpu(estate_path):
    result = make(estate_path, "chat", [1], "vllm/qwen3-8b", rig=(RTX3090, RTX3090))
    assert result.pod.port == 8020 and result.port_chosen
    assert result.fit is not None and result.fit.verdict == "fits"
    doc = yaml.safe_load(estate_path.read_text())
    assert doc["schema_version"] == 1
    assert doc["estate"] == [
        {"name": "chat", "slug": "vllm/qwen3-8b", "gpus": [1], "port": 8020, "uuids": [probe(RTX3090, RTX3090).gpus()[1].uuid]}
    ]


def test_2_tp_mismatch_is_a_hard_reject(estate_path):
    message = refused(estate_path, "bad", [1], "vllm/qwen3-32b-awq-tp2")
    assert "TP=2" in message and "selected 1 GPU(s)" in message and "C1" in message and "`bad`" in message
    assert not estate_path.exists()


def test_3_gpu_collision_names_both_pods_and_the_gpu(estate_path):
    make(estate_path, "chat", [1], "vllm/qwen3-8b")
    message = refused(estate_path, "chat2", [1], "vllm/qwen3-8b")
    assert "E1: GPU 1 (RTX 3090) claimed by chat, chat2" in message


def test_4_port_collision_names_port_and_pods(estate_path):
    make(estate_path, "chat", [1], "vllm/qwen3-8b")
    message = refused(estate_path, "p", [0], "vllm/qwen3-8b", port=8020)
    assert "E4: port 8020 claimed by chat, p" in message


def test_5_distinct_errors_for_duplicate_unknown_slug_bad_index_empty_list(estate_path):
    make(estate_path, "chat", [1], "vllm/qwen3-8b")
    assert f"pod `chat` already exists in {estate_path}" in refused(estate_path, "chat", [2], "vllm/qwen3-8b")
    # names collide ignoring case, and the message names the existing pod
    assert "pod `chat` already exists" in refused(estate_path, "CHAT", [2], "vllm/qwen3-8b")
    assert "unknown slug `vllm/nope`" in refused(estate_path, "x", [2], "vllm/nope")
    assert "GPU index 7 not present (detected: [0, 1, 2, 3]" in refused(estate_path, "x", [7], "vllm/qwen3-8b")
    assert "--gpus must list at least one index" in refused(estate_path, "x", [], "vllm/qwen3-8b", exc=UsageError)
    assert "is not valid" in refused(estate_path, "Bad_Name", [2], "vllm/qwen3-8b", exc=UsageError)


def test_6_default_ports_follow_slot_rule(estate_path):
    assert make(estate_path, "a", [0], "vllm/qwen3-8b").pod.port == 8020
    assert make(estate_path, "b", [1], "vllm/qwen3-8b").pod.port == 8040
    assert make(estate_path, "c", [2, 3], "vllm/qwen3-32b-awq-tp2").pod.port == 8050


def test_6b_default_port_skips_ports_bound_on_the_host(estate_path):
    bound = {8020, 8021}
    result = create_pod(estate_path, "a", [0], "vllm/qwen3-8b", gpus=probe(RTX3090).gpus(), catalog=CAT, fit=fake_fit, is_bound=bound.__contains__)
    assert result.pod.port == 8022


def test_7_heterogeneous_set_accepted_but_homogeneous_arch_slug_refused(estate_path):
    rig = (RTX3090, RTX3090, RTX5090, RTX3090)
    result = make(estate_path, "het", [2, 3], "vllm/qwen3-32b-awq-tp2", rig=rig)
    assert any(w.code == "arch" and w.severity == "warning" for w in result.warnings)
    message = refused(estate_path, "nv", [0, 2], "vllm/qwen3-30b-nvfp4-tp2", rig=rig)
    assert "needs one GPU architecture across its TP=2 group" in message
    assert "GPU 0 (RTX 3090, sm 8.6)" in message and "GPU 2 (RTX 5090, sm 12.0)" in message


def test_8_wont_fit_is_refused_and_force_allows_it(estate_path):
    message = refused(estate_path, "n1", [0], "vllm/llama-70b")
    assert "does not fit the selected GPU(s) GPU 0: wont-fit" in message and "`n1`" in message
    result = make(estate_path, "n1", [0], "vllm/llama-70b", force=True)
    assert result.fit.verdict == "wont-fit"
    assert any("allowed by --force" in w.message for w in result.warnings)


def test_9_unpriced_slug_accepted_and_shown_as_not_priced(estate_path):
    result = make(estate_path, "g", [0], "llamacpp/gemma-3-12b-q4")
    assert result.fit.verdict == "unknown"
    shown = [w for w in result.warnings if w.code == "fit"]
    assert shown and "not priced" in shown[0].message and shown[0].severity == "warning"


def test_12_rm_removes_refuses_running_and_reports_unknown(estate_path):
    make(estate_path, "chat", [0], "vllm/qwen3-8b")
    make(estate_path, "coder", [1, 2], "vllm/qwen3-32b-awq-tp2")
    before = estate_path.read_bytes()
    with pytest.raises(Refused, match=r"pod `chat` is running — `c3 pod down chat` first"):
        remove_pod(estate_path, "chat", is_running=lambda pod: True)
    assert estate_path.read_bytes() == before
    with pytest.raises(Refused, match="pod `nope` not found in"):
        remove_pod(estate_path, "nope")
    assert estate_path.read_bytes() == before
    result = remove_pod(estate_path, "chat", is_running=lambda pod: None)
    assert "docker rm -f c3-chat" in result.warning
    assert [p.name for p in load_estate(estate_path).pods] == ["coder"]
    assert remove_pod(estate_path, "coder", is_running=lambda pod: False).warning is None
    assert load_estate(estate_path).pods == []


def test_12b_rm_without_a_file(estate_path):
    with pytest.raises(Refused, match="no estate file at"):
        remove_pod(estate_path, "chat")


def _doc(*pods, **top):
    return {"schema_version": 1, **top, "estate": list(pods)}


def _problems(doc, rig=(RTX3090, RTX3090)):
    estate, schema = parse_document(doc, "hand.yml")
    return [p.message for p in schema + validate_estate(estate, probe(*rig).gpus(), CAT, fit=fake_fit) if p.blocking]


def test_13_hand_written_file_validation():
    msgs = _problems(_doc({"name": "a", "slug": "vllm/qwen3-32b-awq-tp2", "gpus": [0], "port": 8000}))
    assert any("tp=2 * pp=1 = 2 != 1 cards selected" in m for m in msgs)
    msgs = _problems(_doc({"name": "b", "slug": "vllm/qwen3-8b", "gpus": [5], "port": 8000}))
    assert any("E1: pod `b`: GPU index 5 not present (detected: [0, 1]; rig size 2)" in m for m in msgs)
    msgs = _problems(
        _doc(
            {"name": "qwen-left", "compose": "vllm/qwen3-8b", "gpus": [0], "port": 8110},
            {"name": "qwen-right", "compose": "vllm/qwen3-8b", "gpus": [0], "port": 8110},
        )
    )
    assert any(m.startswith("E1: GPU 0") and m.endswith("claimed by qwen-left, qwen-right") for m in msgs)
    assert "E4: port 8110 claimed by qwen-left, qwen-right" in msgs
    msgs = _problems(_doc({"name": "x", "compose": "vllm/not-real", "gpus": [0], "port": 8000}))
    assert msgs == ["pod `x`: unknown slug `vllm/not-real`"]
    assert _problems(_doc({"name": "ok", "slug": "vllm/qwen3-8b", "gpus": [1], "port": 8000})) == []


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"schema_version": 2, "estate": []}, "unsupported estate schema_version=2; supported=[1]"),
        ({"schema_version": 1, "estate": {"a": 1}}, "must contain an `estate:` list"),
        ({"schema_version": 1, "estates": []}, "unknown key `estates`"),
        (_doc("chat"), "estate entry #1 must be a mapping"),
        (_doc({"slug": "vllm/qwen3-8b", "gpus": [0], "port": 1}), "estate entry #1 has no name"),
        (_doc({"name": "a", "gpus": [0], "port": 1}), "pod `a` (estate entry #1) has no slug"),
        (_doc({"name": "a", "slug": "vllm/qwen3-8b", "port": 1}), "must set gpus: [..]"),
        (_doc({"name": "a", "slug": "vllm/qwen3-8b", "gpus": [], "port": 1}), "must set gpus: [..]"),
        (_doc({"name": "a", "slug": "vllm/qwen3-8b", "gpus": ["0"], "port": 1}), "non-integer GPU index"),
        (_doc({"name": "a", "slug": "vllm/qwen3-8b", "gpus": [True], "port": 1}), "non-integer GPU index"),
        (_doc({"name": "a", "slug": "vllm/qwen3-8b", "gpus": [-1], "port": 1}), "negative GPU index"),
        (_doc({"name": "a", "slug": "vllm/qwen3-8b", "gpus": [1, 1], "port": 1}), "lists GPU 1 twice"),
        (_doc({"name": "a", "slug": "vllm/qwen3-8b", "gpus": [0], "port": "80"}), "must set an integer port"),
        (_doc({"name": "a", "slug": "vllm/qwen3-8b", "gpus": [0], "port": 70000}), "must set an integer port"),
        (_doc({"name": "a", "slug": "vllm/qwen3-8b", "gpu": [0], "port": 1}), "unknown key `gpu`"),
        (_doc({"name": "Chat", "slug": "vllm/qwen3-8b", "gpus": [0], "port": 1}), "pod name `Chat` is not valid"),
        (
            _doc({"name": "chat", "slug": "vllm/qwen3-8b", "gpus": [0], "port": 1}, {"name": "chat", "slug": "vllm/qwen3-8b", "gpus": [1], "port": 2}),
            "duplicate pod name `chat`",
        ),
    ],
)
def test_14_schema_guard_specific_errors(doc, expected):
    _, problems = parse_document(doc, "hand.yml")
    assert any(expected in p.message for p in problems), [p.message for p in problems]


def test_names_collide_ignoring_case_in_memory():
    estate = Estate(pods=[Pod(name="chat", slug="vllm/qwen3-8b", gpus=(0,), port=1), Pod(name="chat", slug="vllm/qwen3-8b", gpus=(1,), port=2)])
    problems = validate_estate(estate, probe(RTX3090, RTX3090).gpus(), CAT, fit=fake_fit)
    assert any(p.code == "name" and p.blocking for p in problems)


def test_pp_counts_in_c1():
    estate = Estate(pods=[Pod(name="p", slug="vllm/pp2", gpus=(0,), port=1)])
    msgs = [p.message for p in validate_estate(estate, probe(RTX3090, RTX3090).gpus(), CAT, fit=fake_fit) if p.blocking]
    assert any("tp=1 * pp=2 = 2 != 1 cards selected" in m for m in msgs)


def test_status_gating_needs_force(estate_path):
    message = refused(estate_path, "e", [0], "vllm/exp-model")
    assert "is experimental: new engine build" in message
    assert "deprecated" in refused(estate_path, "d", [0], "vllm/old-model")
    result = make(estate_path, "e", [0], "vllm/exp-model", force=True)
    assert any(w.code == "status" for w in result.warnings)


def test_required_compute_capability(estate_path):
    message = refused(estate_path, "h", [0], "vllm/needs-hopper")
    assert "GPU 0 (RTX 3090, sm 8.6) is below sm 9.0" in message
    make(estate_path, "h", [0], "vllm/needs-hopper", rig=(RTX5090,))
    # fallback path: allowed on sm 8.6 with a warning
    result = make(estate_path, "nv", [1, 2], "vllm/qwen3-30b-nvfp4-tp2", rig=(RTX5090, RTX3090, RTX3090))
    assert any(w.code == "sm" and "slower sm 8.6 path" in w.message for w in result.warnings)


def test_incompatible_hw_cannot_be_forced(estate_path):
    def incompatible(entry, gpus):
        from backend.models.fit import FitReport

        return FitReport(verdict="incompatible-hw", reasons=["kv dtype fp8 needs sm 8.9"])

    before = None
    with pytest.raises(Refused, match="incompatible-hw — kv dtype fp8 needs sm 8.9"):
        create_pod(estate_path, "a", [0], "vllm/qwen3-8b", gpus=probe(RTX3090).gpus(), catalog=CAT, force=True, fit=incompatible, is_bound=None)
    assert not estate_path.exists() and before is None


def test_create_is_not_blocked_by_an_unrelated_broken_pod(estate_path):
    estate_path.write_text("schema_version: 1\nestate:\n  - {name: old, slug: vllm/qwen3-8b, gpus: [0], port: 8000, uuids: [GPU-gone]}\n")
    result = make(estate_path, "new", [1], "vllm/qwen3-8b")
    assert result.pod.name == "new"
    # but the rig re-order is visible to a whole-file validation
    check = check_estate(load_estate(estate_path), probe(RTX3090, RTX3090).gpus(), CAT, fit=fake_fit)
    assert any(p.code == "uuid" and p.pod == "old" for p in check.problems)


def test_no_gpu_probe_skips_gpu_rules_with_a_note():
    estate = Estate(pods=[Pod(name="a", slug="vllm/qwen3-8b", gpus=(9,), port=1)])
    problems = validate_estate(estate, None, CAT, fit=fake_fit)
    assert not [p for p in problems if p.blocking]
    assert any(p.code == "gpus" and p.severity == "note" for p in problems)


def test_rm_with_a_runtime_that_raises_its_own_error(estate_path):
    make(estate_path, "chat", [0], "vllm/qwen3-8b")

    def broken(pod):
        raise ConnectionRefusedError("docker.sock")

    result = remove_pod(estate_path, "chat", is_running=broken)
    assert "ConnectionRefusedError: docker.sock" in result.warning and load_estate(estate_path).pods == []


def test_explicit_port_bound_on_the_host_is_a_warning(estate_path):
    result = create_pod(estate_path, "a", [0], "vllm/qwen3-8b", gpus=probe(RTX3090).gpus(), catalog=CAT, port=9000, fit=fake_fit, is_bound={9000}.__contains__)
    assert result.pod.port == 9000
    assert any(w.code == "port" and "port 9000 is in use on this host" in w.message for w in result.warnings)


def test_a_gpu_listed_twice_in_one_pod_is_not_a_collision_with_itself():
    estate = Estate(pods=[Pod(name="a", slug="vllm/qwen3-32b-awq-tp2", gpus=(1, 1), port=1)])
    msgs = [p.message for p in validate_estate(estate, probe(RTX3090, RTX3090).gpus(), CAT, fit=fake_fit) if p.blocking]
    assert msgs == ["E1: pod `a` lists a GPU twice: [1, 1]"]
