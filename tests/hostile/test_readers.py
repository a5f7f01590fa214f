"""The readers under every file c3 reads: strict YAML gives what `yaml.safe_load` gives for any plain
document (so no value changes type), refuses what it must with the line, and the atomic writer and
its lock go through symlinks."""

from __future__ import annotations

import os
import threading
import time

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from backend import strict_yaml
from backend.atomic import locked, write_atomic
from backend.errors import UsageError
from backend.userfiles import load_json, read_text

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.floats(allow_nan=False), st.text(max_size=30),
                    st.sampled_from(["yes", "No", "~", "0x1F", "1_000", "0o7", ".5", "+3", "2024-01-01", "2024-01-01T10:00:00Z", "null", "<<", "=", ""]))
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.one_of(st.text(max_size=12), st.integers(0, 99)), inner, max_size=5), max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(doc=documents, flow=st.booleans())
def test_plain_documents_read_exactly_as_safe_load_reads_them(doc, flow):
    text = yaml.safe_dump(doc, default_flow_style=flow, allow_unicode=True)
    assert strict_yaml.parse(text) == yaml.safe_load(text)


@pytest.mark.parametrize(
    ("text", "problem", "line"),
    [
        ("a: 1\nb:\n  c: 2\n  c: 3\n", "duplicate key `c` (first at line 3)", 4),
        ("base: &b {x: 1}\nother:\n  <<: *b\n", "merge keys", 3),
        ("a: &x [1]\nb: *x\n", "alias `*x`", 2),
        ("a: !!python/name:os.system x\n", "is not accepted", 1),
        ("a: !!set {x, y}\n", "is not accepted", 1),
        ("? {a: 1}\n: 2\n", "mapping key must be a plain value", 1),
    ],
)
def test_refusals_name_their_line(text, problem, line):
    with pytest.raises(strict_yaml.YamlRefused) as info:
        strict_yaml.parse(text)
    assert problem in info.value.problem and info.value.line == line


def test_the_node_budget_stops_a_flood():
    with pytest.raises(strict_yaml.YamlRefused, match="more than 1,000 values"):
        strict_yaml.parse("[" + "0," * 2000 + "0]", max_nodes=1000)


def test_json_refuses_duplicate_keys_deep_nesting_and_huge_integers():
    for text, expected in (('{"a": 1, "a": 2}', "duplicate key `a`"), ("[" * 50_000 + "]" * 50_000, "nested too deeply"),
                           ("9" * 5001, "JSON cannot read")):
        with pytest.raises(UsageError, match=expected):
            load_json(text, source="f.json", what="node registry")


def test_reads_refuse_special_files_and_oversize_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(UsageError, match="FIFO"):
        read_text(fifo, what="estate file")
    with pytest.raises(UsageError, match="character device"):
        read_text("/dev/zero", what="estate file")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(UsageError, match="larger than 1 KiB"):
        read_text(big, what="estate file", limit=1024)
    assert time.monotonic() - started < 5  # a blocking read of the FIFO would never return (room for a busy box)
    assert read_text(tmp_path / "none", what="estate file", missing_ok=True) is None


def test_writes_and_locks_go_through_a_symlink(tmp_path):
    target = tmp_path / "real" / "estate.yml"
    target.parent.mkdir()
    target.write_text("old\n")
    link = tmp_path / "estate.yml"
    link.symlink_to(target)
    write_atomic(link, "new\n")
    assert link.is_symlink() and target.read_text() == "new\n"
    # A writer through the link and one on the target share one lock.
    order: list[str] = []
    def other_writer() -> None:
        with locked(target):
            order.append("target")

    with locked(link):
        worker = threading.Thread(target=other_writer)
        worker.start()
        time.sleep(0.3)
        order.append("link released")
    worker.join(5)
    assert order == ["link released", "target"]
