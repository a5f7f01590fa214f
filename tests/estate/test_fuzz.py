"""Hypothesis fuzzing: no estate file and no command line gives a traceback or a partial write.

In-process runs (many examples) catch any exception escaping `main()` — the thing a user would see
as a traceback; a smaller batch of real subprocesses checks stderr for "Traceback" end to end.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import backend.catalog as catalog_module
import backend.estate.validate as validate_module
from backend.catalog import load_catalog
from backend.estate import load_estate
from tests.estate.cli import RIG_4, run_inproc, run_proc
from tests.estate.fakes import fake_fit

EXIT_CODES = {0, 1, 2, 3}
SLUGS = ["vllm/qwen3-8b", "vllm/qwen3-32b-awq-tp2", "llamacpp/qwen3-8b-q4km", "vllm/nope", "", "x" * 300, "vllm/qwen3-8b\n"]
FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["chat", "Chat", "vllm/qwen3-8b", "compose", "slug", "gpus", "port", "estate", "schema_version", "-", "0"]),
)
anything = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=10), st.integers()), inner, max_size=4)), max_leaves=20)

pod_entries = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.sampled_from(["chat", "coder", "CHAT", "a-b", "-x", ""]), scalars),
        "slug": st.one_of(st.sampled_from(SLUGS), scalars),
        "compose": st.one_of(st.sampled_from(SLUGS), scalars),
        "gpus": st.one_of(st.lists(st.integers(min_value=-2, max_value=9), max_size=5), anything),
        "port": st.one_of(st.integers(min_value=-5, max_value=70000), anything),
        "uuids": st.one_of(st.lists(st.text(max_size=8), max_size=3), anything),
        "extra": anything,
    },
)
documents = st.one_of(
    anything,
    st.fixed_dictionaries(
        {"estate": st.lists(st.one_of(pod_entries, anything), max_size=5)},
        optional={"schema_version": st.one_of(st.just(1), scalars), "rig": anything, "created": anything, "bogus": anything},
    ),
)
raw_texts = st.one_of(
    st.text(max_size=200),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    st.sampled_from(["estate: [", "schema_version: 1\nestate:\n  - &a [*a]\n", "!!python/object:os.system {}", "estate: !!binary 'AAAA'", "a: b: c"]),
)


@pytest.fixture
def rig(tmp_path_factory, monkeypatch):
    path = tmp_path_factory.mktemp("rig") / "rig.yaml"
    path.write_text(RIG_4)
    monkeypatch.setenv("C3_RIG", str(path))
    monkeypatch.setattr(validate_module, "default_fit", lambda: fake_fit)
    # The catalog is not what is fuzzed here: load it once instead of once per invocation.
    catalog = load_catalog()  # here, after the autouse fixture pointed C3_HOME at a scratch folder
    monkeypatch.setattr(catalog_module, "load_catalog", lambda: catalog)  # read at call time by the views
    return path


def _write(path: Path, doc) -> bytes:
    try:
        text = yaml.safe_dump(doc, allow_unicode=True)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError):
        text = repr(doc)
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    return path.read_bytes()


def _check_every_verb(path: Path) -> None:
    before = path.read_bytes()
    for args in (
        ("pod", "list", "--json", "--file", str(path)),
        ("pod", "list", "--file", str(path)),
        ("pod", "validate", "--file", str(path)),
        ("pod", "validate", "--json", "--file", str(path)),
    ):
        r = run_inproc(*args)
        assert r.code in EXIT_CODES, (args, r)
        assert path.read_bytes() == before, "a read-only verb changed the file"
    for args in (
        ("pod", "create", "fuzz-new", "--gpus", "3", "--slug", "vllm/qwen3-8b", "--port", "9999", "--file", str(path)),
        ("pod", "rm", "chat", "--file", str(path)),
    ):
        r = run_inproc(*args)
        assert r.code in EXIT_CODES, (args, r)
        if r.code != 0:
            assert path.read_bytes() == before, f"failed {args[1]} changed the file: {r.err}"
        else:
            load_estate(path)  # what we wrote parses
            before = path.read_bytes()


@FUZZ
@given(doc=documents)
def test_random_estate_documents(rig, tmp_path_factory, doc):
    path = tmp_path_factory.mktemp("f") / "estate.yml"
    _write(path, doc)
    _check_every_verb(path)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=raw_texts)
def test_random_estate_bytes(rig, tmp_path_factory, text):
    path = tmp_path_factory.mktemp("f") / "estate.yml"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    _check_every_verb(path)


names = st.one_of(st.sampled_from(["chat", "coder", "Chat", "a", "-a", "a" * 63, "a" * 64, "x-1", "--help", "", "ünï"]), st.text(max_size=20))
gpu_lists = st.one_of(
    st.lists(st.integers(min_value=-3, max_value=12), max_size=5).map(lambda xs: ",".join(map(str, xs))),
    st.text(alphabet="0123456789,- a", max_size=10),
    st.text(max_size=10),
)
ports = st.one_of(st.none(), st.integers(min_value=-10, max_value=70000).map(str), st.text(max_size=6))
slugs = st.one_of(st.sampled_from(SLUGS), st.text(max_size=20))
SEEDED = "schema_version: 1\nestate:\n  - {name: chat, slug: vllm/qwen3-8b, gpus: [0], port: 8020}\n"


def _argv_ok(text: str) -> bool:
    """What an OS argv can carry at all (no NUL, encodable)."""
    if "\x00" in text:
        return False
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return False
    return True


def _create_args(name, gpus, port, slug, force, path):
    args = ["pod", "create", "--gpus", gpus, "--slug", slug, "--file", str(path)]
    if port is not None:
        args += ["--port", port]
    if force:
        args.append("--force")
    return [*args, "--", name]  # after `--` a name such as `--help` is a name, not an option


@FUZZ
@given(name=names, gpus=gpu_lists, port=ports, slug=slugs, force=st.booleans(), seeded=st.booleans())
def test_random_create_arguments(rig, tmp_path_factory, name, gpus, port, slug, force, seeded):
    path = tmp_path_factory.mktemp("f") / "estate.yml"
    if seeded:
        path.write_text(SEEDED)
    before = path.read_bytes() if path.exists() else None
    r = run_inproc(*_create_args(name, gpus, port, slug, force, path))
    assert r.code in EXIT_CODES, r
    after = path.read_bytes() if path.exists() else None
    if r.code != 0:
        assert after == before, r.err
        assert r.err.startswith("c3: error: ") or r.err.startswith("Usage") or "Error" in r.err, r.err
    else:
        assert any(p.name == name for p in load_estate(path).pods)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=names, gpus=gpu_lists, port=ports, slug=slugs, doc=documents)
def test_real_process_never_prints_a_traceback(rig, tmp_path_factory, name, gpus, port, slug, doc):
    assume(all(_argv_ok(a) for a in (name, gpus, port or "", slug)))
    path = tmp_path_factory.mktemp("f") / "estate.yml"
    before = _write(path, doc)
    env = {"C3_RIG": str(rig), "C3_HOME": os.environ["C3_HOME"], "C3_STATE": os.environ["C3_STATE"]}
    for args in (_create_args(name, gpus, port, slug, False, path), ["pod", "list", "--json", "--file", str(path)], ["pod", "rm", "--file", str(path), "--", name]):
        r = run_proc(*args, env=env)
        assert "Traceback" not in r.err and "Traceback" not in r.out, r.err
        assert r.code in EXIT_CODES, (args, r)
        if r.code != 0:
            assert path.read_bytes() == before
        before = path.read_bytes()


file_names = st.text(min_size=1, max_size=300).filter(lambda s: "/" not in s and "\x00" not in s and s not in (".", ".."))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=file_names)
def test_random_file_names(rig, tmp_path_factory, name):
    """Any --file name inside a scratch folder: a created file or one error line, never an exception."""
    base = tmp_path_factory.mktemp("names")
    path = base / name
    r = run_inproc("pod", "create", "--gpus", "0", "--slug", "vllm/qwen3-8b", "--file", str(path), "--", "chat")
    assert r.code in EXIT_CODES, r
    if r.code == 0:
        assert [p.name for p in load_estate(path).pods] == ["chat"]
    for args in (("pod", "list", "--json", "--file", str(path)), ("pod", "rm", "--file", str(path), "--", "chat")):
        assert run_inproc(*args).code in EXIT_CODES
