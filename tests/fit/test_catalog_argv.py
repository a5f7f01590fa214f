"""Every built-in slug renders an engine command line that names each flag once.

A catalog entry's extra_args are appended to what the engine adapter already renders from the
entry's fields; repeating a flag there (e.g. llama.cpp's `-hf`, `-ngl`) made engines parse it twice.
"""

from __future__ import annotations

import pytest

from backend.catalog import load_catalog
from backend.runtime.engines import render

ENTRIES = [e for e in load_catalog().entries if e.engine != "custom"]


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.slug for e in ENTRIES])
def test_no_flag_is_rendered_twice(entry):
    argv = list(render(entry).argv)
    flags = [a.split("=", 1)[0] for a in argv if a.startswith("-") and not a.lstrip("-").replace(".", "").isdigit()]
    repeated = sorted({f for f in flags if flags.count(f) > 1})
    assert not repeated, f"{entry.slug}: {repeated} in {argv}"
