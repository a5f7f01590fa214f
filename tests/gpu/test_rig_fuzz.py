"""Hypothesis: any rig file gives a GPU listing or one usage-error line, never a traceback."""

from __future__ import annotations

import json

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.estate.cli import run_inproc

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(), st.text(max_size=12), st.sampled_from(["8.6", "12.0", "NVIDIA GeForce RTX 3090"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=10)
gpu_lines = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.just("NVIDIA GeForce RTX 3090"), scalars),
        "total_mib": st.one_of(st.integers(-5, 200000), scalars),
        "sm": st.one_of(st.sampled_from(["8.6", "12.0", "9", 8.6, 12.1]), scalars),
        "used_mib": st.one_of(st.integers(-5, 300000), scalars),
        "reserved_mib": st.one_of(st.integers(-5, 300000), scalars),
        "uuid": st.one_of(st.just("GPU-x"), scalars),
        "util_pct": st.one_of(st.integers(-5, 120), scalars),
        "power_w": st.one_of(st.floats(), scalars),
        "other": values,
    },
)
rigs = st.one_of(values, st.fixed_dictionaries({"gpus": st.one_of(st.lists(st.one_of(gpu_lines, values), max_size=4), values)}))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=rigs)
def test_any_rig_file(tmp_path_factory, monkeypatch, doc):
    path = tmp_path_factory.mktemp("rig") / "rig.yaml"
    try:
        path.write_text(yaml.safe_dump(doc))
    except (yaml.YAMLError, ValueError):
        path.write_text(repr(doc))
    monkeypatch.setenv("C3_RIG", str(path))
    for args in (("gpus", "--json"), ("gpus",)):
        r = run_inproc(*args)
        assert r.code in (0, 2), r
        if r.code == 2:
            assert r.err.startswith("c3: error: simulated rig file") and str(path) in r.err
        elif args == ("gpus", "--json"):
            assert isinstance(json.loads(r.out)["gpus"], list)
