"""backend.settings: every variable read in one place, bad values refused with one line, secrets
never printed, and `c3 demo` configured without rewriting the process environment."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from backend import paths, settings
from backend.errors import UsageError

TOKEN = "hf_abcdefghijklmnopqrstuvwxyz0123"
KEY = "sk-settings-secret-0123456789"


def test_secrets_are_secret_strings_in_every_rendering():
    got = settings.load({"HF_TOKEN": TOKEN, "VLLM_API_KEY": KEY, "C3_RIG": "demo"})
    assert got.rig == "demo"
    assert got.hf_token is not None and got.hf_token.get_secret_value() == TOKEN
    for text in (repr(got), str(got), got.model_dump_json(), repr(got.model_dump())):
        assert TOKEN not in text and KEY not in text
    assert got.secret_env() == {"HF_TOKEN": TOKEN}


@pytest.mark.parametrize(("variable", "value"), [("C3_RUNTIME", "kubernetes"), ("C3_PROBE_USE_ENV_PROXY", "maybe"),
                                                  ("C3_POOL_LOOP", "trio"), ("C3_STUB_STARTUP_DELAY", "-1")])
def test_a_bad_value_is_a_usage_error_naming_the_variable(variable, value):
    with pytest.raises(UsageError) as refused:
        settings.load({variable: value})
    assert variable in refused.value.message and refused.value.hint


def test_variables_are_read_as_pydantic_settings_read_them():
    """The rules of the environment source c3 used before it read the variables itself (issue 22):
    names match in any case (the last spelling wins), an aliased variable is read by its own name
    first, then as C3_<field>; an empty value is a value; nothing else is read."""
    got = settings.load({"c3_home": "/lower", "C3_Rig": "demo", "C3_HF_TOKEN": "prefixed", "VLLM_API_KEY": "own",
                         "C3_VLLM_API_KEY": "second", "C3_GPU_MODE": "", "C3_UNKNOWN": "x", "HOME": "/elsewhere"})
    assert str(got.home) == "/lower" and got.rig == "demo" and got.gpu_mode == ""
    assert got.hf_token is not None and got.hf_token.get_secret_value() == "prefixed"
    assert got.vllm_api_key is not None and got.vllm_api_key.get_secret_value() == "own"
    assert settings.load({"C3_HOME": "/first", "c3_home": "/last"}).home == settings.load({"c3_home": "/last"}).home
    assert settings.load({"C3_RUNTIME": " SIM ", "C3_ASCII": "0", "C3_STUB_STARTUP_DELAY": "2.5"}).model_dump(include={"runtime", "ascii", "stub_startup_delay"}) \
        == {"runtime": "sim", "ascii": False, "stub_startup_delay": 2.5}
    with pytest.raises(UsageError, match="C3_ASCII"):
        settings.load({"C3_ASCII": ""})


def test_current_follows_a_variable_spelled_in_lower_case(monkeypatch, tmp_path):
    monkeypatch.delenv("C3_HOME")
    monkeypatch.setenv("c3_home", str(tmp_path / "a"))
    assert paths.config_home() == tmp_path / "a"
    monkeypatch.setenv("c3_home", str(tmp_path / "b"))
    assert paths.config_home() == tmp_path / "b"


def test_the_cli_refuses_a_bad_variable_with_one_line_and_exit_2(tmp_path):
    env = {**os.environ, "C3_RUNTIME": "kubernetes", "VLLM_API_KEY": KEY}
    proc = subprocess.run([sys.executable, "-m", "c3", "pod", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("c3: error: C3_RUNTIME is not valid") and lines[1].startswith("hint: ")
    assert "Traceback" not in proc.stderr and KEY not in proc.stderr + proc.stdout and "kubernetes" not in lines[0]


def test_current_follows_the_environment_until_an_entry_point_installs_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("C3_HOME", str(tmp_path / "a"))
    assert paths.config_home() == tmp_path / "a"
    monkeypatch.setenv("C3_HOME", str(tmp_path / "b"))
    assert paths.config_home() == tmp_path / "b"
    with settings.using(settings.load({"C3_HOME": str(tmp_path / "pinned")})):
        monkeypatch.setenv("C3_HOME", str(tmp_path / "c"))
        assert paths.config_home() == tmp_path / "pinned"
    assert paths.config_home() == tmp_path / "c"


def test_the_demo_is_configured_without_touching_the_process_environment(monkeypatch, tmp_path):
    from backend.actions.session import enter_demo
    from backend.sim.demo import demo_settings

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("C3_STUB_STARTUP_DELAY", raising=False)
    before = dict(os.environ)
    demo = enter_demo(startup_delay_s=0.5)
    try:
        assert dict(os.environ) == before
        assert demo.demo and demo.rig == "demo" and demo.runtime == "sim"
        assert paths.config_home() == demo.home and (demo.home / "catalog.d" / "demo.yaml").is_file()
        assert paths.state_home() == demo.state != before["C3_STATE"]
        # A stub engine the demo starts learns the demo's settings from its env dict.
        child = demo.child_env()
        assert child["C3_HOME"] == str(demo.home) and child["C3_DEMO"] == "1" and child["C3_STUB_STARTUP_DELAY"] == "0.5"
        assert demo_settings() is demo  # already inside the demo: nothing rebuilt
    finally:
        settings.reset()
    assert paths.config_home() != demo.home


def test_no_c3_variable_is_read_outside_the_settings():
    """`os.environ` reads of configuration live in backend/settings.py only (stub engines, which run
    as their own processes, and the recipe-named key variable are the documented exceptions)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    # c3/look.py reads the terminal's own conventions (the locale, NO_COLOR), not c3's configuration.
    # backend/nodes/cache_scan.py runs on a node and reads that node's HF_HOME/HF_HUB_CACHE; the gateway's LiteLLM
    # config and its CLI help write LiteLLM's `os.environ/NAME` reference as text, reading nothing.
    # backend/sim/sandbox.py's main() is the simulated pod's shell process, run by the terminal: it keeps the
    # terminal's TERM, as `docker exec -it` does.
    allowed = {"backend/nodes/cache_scan.py", "backend/gateway/litellm.py", "c3/cli/gateway.py",
               "backend/settings.py", "backend/sim/stub_engine.py", "backend/sim/stub_boot.py", "backend/cluster/plan.py", "backend/sim/runtime.py", "c3/look.py",
               "backend/sim/sandbox.py"}
    found = []
    for path in [*root.joinpath("backend").rglob("*.py"), *root.joinpath("c3").rglob("*.py")]:
        rel = path.relative_to(root).as_posix()
        if rel in allowed:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"os\.environ(?!\[\"TEXTUAL_|\.setdefault\(\"TEXTUAL_)|os\.getenv", line):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
