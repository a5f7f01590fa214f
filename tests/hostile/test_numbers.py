"""Issue 25: hostile numbers in a config.json and in `c3 fit`'s flags, through the real `c3`.

Each must be one `c3: error:` line naming the value, exit 2 (usage), at once and within the memory
cap; before backend.limits, 1e308 hidden units and a negative layer count were tracebacks, 10^18
layers ran 30 s into 2.8 GB, and --weights-gib 1e308 overflowed.
"""

from __future__ import annotations

import json

import pytest

from tests.hostile.helpers import AT_ONCE_S, run

BASE = {"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000}
FIT = ("--vram-gib", "24", "--tp", "1")


@pytest.mark.parametrize(("field", "value", "said"), [
    ("hidden_size", 1e308, "`hidden_size`"),
    ("num_hidden_layers", -4, "`num_hidden_layers`"),
    ("num_hidden_layers", 10**18, "`num_hidden_layers`"),
    ("num_attention_heads", 1e300, "`num_attention_heads`"),
    ("vocab_size", -1, "`vocab_size`"),
    ("max_position_embeddings", 10**40, "`max_position_embeddings`"),
    ("num_key_value_heads", 0, "`num_key_value_heads`"),
    ("intermediate_size", 10**30, "`intermediate_size`"),
    ("rope_scaling", {"type": "linear", "factor": 1e308}, "rope_scaling.factor"),
    ("partial_rotary_factor", -2.0, "`partial_rotary_factor`"),
])
def test_a_hostile_number_in_config_json_is_one_usage_error(tmp_path, field, value, said):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**BASE, field: value}))
    r = run("fit", "--config", str(config), *FIT)
    assert r.rc == 2 and not r.timed_out and r.seconds < AT_ONCE_S, (r.rc, r.seconds, r.err[-1500:])
    assert said in r.error_line(), r.err


@pytest.mark.parametrize(("flag", "value"), [("--weights-gib", "1e308"), ("--weights-gib", "nan"), ("--weights-gib", "-1"),
                                             ("--gpu-mem-util", "nan")])
def test_a_hostile_number_in_a_fit_flag_is_one_usage_error(tmp_path, flag, value):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(BASE))
    r = run("fit", "--config", str(config), *FIT, flag, value)
    assert r.rc == 2 and flag in r.error_line(), (r.rc, r.err[-1500:])


def test_infinity_written_in_config_json_is_refused(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(BASE).replace('"hidden_size": 4096', '"hidden_size": Infinity'))
    r = run("fit", "--config", str(config), *FIT)
    assert r.rc == 2 and ("hidden_size" in r.error_line() or "Infinity" in r.error_line()), r.err
