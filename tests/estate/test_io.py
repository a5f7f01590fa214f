"""Estate file reading and writing: club-3090 compatibility, round trips, atomic locked writes."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import yaml

from backend.atomic import locked
from backend.errors import UsageError
from backend.estate import dump_estate, load_estate, parse_document, save_estate
from backend.estate.ports import default_port, host_port_bound
from backend.models.estate import Estate, Pod

CLUB_FILE = """\
schema_version: 1
created: 2026-05-14T00:00:00Z
rig: {hardware_id: rtx-3090, gpu_count: 2, nvlink_active: false}
estate:
  - {name: chat,  compose: vllm/minimal, gpus: [0],    port: 8020}
  - {name: coder, compose_name: vllm/dual,    gpus: [1, 2], port: 8010}
"""


def test_club3090_file_is_accepted(tmp_path: Path):
    path = tmp_path / "estate.yml"
    path.write_text(CLUB_FILE)
    estate = load_estate(path)
    assert [(p.name, p.slug, p.gpus, p.port) for p in estate.pods] == [("chat", "vllm/minimal", (0,), 8020), ("coder", "vllm/dual", (1, 2), 8010)]
    assert estate.extra["rig"] == {"hardware_id": "rtx-3090", "gpu_count": 2, "nvlink_active": False}
    assert "created" in estate.extra


def test_rewrite_keeps_the_club3090_file_as_written(tmp_path: Path):
    """Issue 16: a club-3090 file keeps its keys, spelling and layout (`compose:` kept; ruamel only
    drops the alignment spaces inside flow mappings)."""
    path = tmp_path / "estate.yml"
    path.write_text(CLUB_FILE)
    save_estate(path, load_estate(path))
    assert path.read_text() == CLUB_FILE.replace("chat,  ", "chat, ").replace("dual,    ", "dual, ").replace("[0],    ", "[0], ")
    doc = yaml.safe_load(path.read_text())
    assert doc["rig"]["gpu_count"] == 2 and doc["created"] is not None
    assert doc["estate"][1] == {"name": "coder", "compose_name": "vllm/dual", "gpus": [1, 2], "port": 8010}


def test_round_trip_is_stable(tmp_path: Path):
    estate = Estate(pods=[Pod(name="a", slug="vllm/x", gpus=(3, 1), port=9000, uuids=("GPU-1", "GPU-2")), Pod(name="b-2", slug="sglang/y", gpus=(0,), port=1)])
    text = dump_estate(estate)
    parsed, problems = parse_document(yaml.safe_load(text), "x")
    assert problems == [] and parsed == estate
    assert dump_estate(parsed) == text


def test_two_slug_keys_that_disagree_are_an_error():
    _, problems = parse_document({"estate": [{"name": "a", "slug": "vllm/a", "compose": "vllm/b", "gpus": [0], "port": 1}]}, "x")
    assert any("two different slugs" in p.message for p in problems)


def test_missing_and_empty_files_are_empty_estates(tmp_path: Path):
    assert load_estate(tmp_path / "none.yml").pods == []
    (tmp_path / "empty.yml").write_text("")
    assert load_estate(tmp_path / "empty.yml").pods == []
    (tmp_path / "nover.yml").write_text("estate: []\n")
    assert load_estate(tmp_path / "nover.yml").schema_version == 1


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"estate: [\n", "failed to parse estate file"),
        (b"\xff\xfe\x00", "is not UTF-8"),
        (b"- 1\n- 2\n", "must be a mapping"),
        (b"schema_version: 1\nestate:\n  - {name: a, slug: s, gpus: [0], port: x}\n  - 3\n", "(and 1 more problem(s))"),
    ],
)
def test_malformed_files_are_usage_errors_naming_the_file(tmp_path: Path, content, expected):
    path = tmp_path / "bad.yml"
    path.write_bytes(content)
    with pytest.raises(UsageError) as info:
        load_estate(path)
    assert expected in info.value.message
    assert str(path) in info.value.message or "estate entry" in info.value.message or "schema" in info.value.message


def test_directory_is_a_usage_error(tmp_path: Path):
    with pytest.raises(UsageError, match="is a directory"):
        load_estate(tmp_path)


def test_lock_is_held_across_read_modify_write(tmp_path: Path):
    """A second writer waits for the first: its read happens after the first's write."""
    path = tmp_path / "estate.yml"
    save_estate(path, Estate())
    entered = threading.Event()
    seen: list[int] = []

    def second() -> None:
        with locked(path):
            seen.append(len(load_estate(path).pods))

    with locked(path):
        thread = threading.Thread(target=second)
        thread.start()
        entered.wait(0.3)  # give the thread a chance to (wrongly) get in
        assert seen == []
        save_estate(path, Estate(pods=[Pod(name="a", slug="s/x", gpus=(0,), port=1)]))
    thread.join(timeout=30)
    assert seen == [1]


def test_default_port_rule():
    estate = Estate(pods=[Pod(name="a", slug="s/x", gpus=(0,), port=8020), Pod(name="b", slug="s/x", gpus=(1,), port=8041)])
    assert default_port(Estate(), 8020, is_bound=None) == 8020
    assert default_port(estate, 8001, is_bound=None) == 8042  # 8001 + 40 = 8041 taken → 8042
    assert default_port(estate, 8001, is_bound=lambda p: p == 8042) == 8043


def test_host_port_bound_sees_a_real_listener():
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert host_port_bound(port) is True
    assert host_port_bound(port) is False


def test_written_file_is_readable_by_others(tmp_path: Path):
    path = tmp_path / "estate.yml"
    save_estate(path, Estate())
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"


def test_create_on_a_club_file_keeps_its_keys_and_stamps_updated(tmp_path: Path):
    from backend.estate import create_pod
    from tests.estate.fakes import RTX3090, FakeCatalog, fake_fit, probe

    path = tmp_path / "estate.yml"
    text = CLUB_FILE.replace("created: 2026-05-14T00:00:00Z", "created: 2026-05-14T00:00:00Z\nupdated: 2026-05-14T00:00:00Z")
    path.write_text(text.replace("vllm/minimal", "vllm/qwen3-8b").replace("vllm/dual", "vllm/qwen3-32b-awq-tp2"))
    create_pod(path, "new", [3], "vllm/qwen3-8b", gpus=probe(*[RTX3090] * 4).gpus(), catalog=FakeCatalog(), fit=fake_fit, is_bound=None)
    doc = yaml.safe_load(path.read_text())
    assert doc["rig"]["hardware_id"] == "rtx-3090"
    assert str(doc["updated"]) != "2026-05-14 00:00:00+00:00" and str(doc["created"]).startswith("2026-05-14")
    assert [p["name"] for p in doc["estate"]] == ["chat", "coder", "new"]
    # issue 16: club-3090's `compose:` stays, and the new entry uses the file's own key
    assert doc["estate"][0] == {"name": "chat", "compose": "vllm/qwen3-8b", "gpus": [0], "port": 8020}
    assert doc["estate"][2]["compose"] == "vllm/qwen3-8b" and "slug" not in doc["estate"][2]
