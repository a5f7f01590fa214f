"""The commands people type most start without importing what they do not use (issue 22).

Each case runs `c3.cli.main` in a fresh interpreter (as the console script does) with an exit hook
that writes `sorted(sys.modules)` to a file, then asserts the heavy libraries the command has no
use for were never imported: Textual/Rich (the cockpit), docker-py, asyncssh, httpx (the runtime
and probes), pydantic-settings (no longer used at all) — and, for the help pages, pydantic and the
YAML parsers too. Each case also asserts the command did its real work (exit code, output, and a
module only the real path imports), so a command that died early cannot pass by importing little.
bench/startup.py measures what these commands cost in CPU time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Runs the real entry point; the exit hook sees the modules after the command finished, whatever its exit path.
PROBE = """
import atexit, json, sys
def _dump(path=sys.argv[1]):
    with open(path, "w", encoding="utf-8") as out:
        json.dump(sorted(sys.modules), out)
atexit.register(_dump)
sys.argv = ["c3", *sys.argv[2:]]
from c3.cli import main
main()
"""

# Never needed by these commands (the cockpit, the container runtime, SSH, HTTP probes).
HEAVY = ("pydantic_settings", "textual", "rich", "docker", "asyncssh", "httpx")
# A help page needs click and nothing that reads or validates data.
HELP_ALSO = ("pydantic", "pydantic_core", "yaml", "ruamel", "pynvml", "backend.settings", "backend.models")

ESTATE = """schema_version: 1
estate:
- name: chat
  slug: vllm/qwen3-8b
  gpus: [0]
  port: 8020
"""

CASES = [
    # (id, argv, environment extras, exit code, text in stdout, a module the real work imports, forbidden)
    ("help", ["--help"], {}, 0, "Commands:", "click", HEAVY + HELP_ALSO),
    ("fit-help", ["fit", "--help"], {}, 0, "--vram-gib", "c3.cli.fit", HEAVY + HELP_ALSO),
    ("pod-list", ["pod", "list"], {"C3_RIG": "demo"}, 0, "1 pod(s) in", "backend.estate", HEAVY),
    # Without C3_RIG: the real NVML probe (absent here, or the rig's fake library), as on a GPU machine.
    ("pod-list-nvml", ["pod", "list"], {}, 0, "free GPU(s): ", "pynvml", HEAVY),
    ("fit-gpus", ["fit", "vllm/qwen3-8b", "--gpus", "0"], {"C3_RIG": "demo"}, 0, "✓ fits", "backend.fit", HEAVY),
    ("fit-card", ["fit", "vllm/qwen3-8b", "--card", "rtx-3090"], {}, 0, "✓ fits", "backend.fit", HEAVY),
]


def imported_by(argv: list[str], tmp_path: Path, extra_env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run `c3 ARGV` in a fresh interpreter; its result and every module it had imported at exit."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "estate.yml").write_text(ESTATE, encoding="utf-8")
    dump = tmp_path / "modules.json"
    env = {**os.environ, "C3_HOME": str(home), "C3_STATE": str(tmp_path / "state"), "COLUMNS": "100", **extra_env}
    proc = subprocess.run([sys.executable, "-c", PROBE, str(dump), *argv], env=env, capture_output=True, text=True, timeout=120)
    return proc, set(json.loads(dump.read_text(encoding="utf-8")))


@pytest.mark.parametrize(("argv", "extra_env", "code", "says", "worked", "forbidden"),
                         [pytest.param(*case[1:], id=case[0]) for case in CASES])
def test_a_common_command_imports_only_what_it_uses(tmp_path, argv, extra_env, code, says, worked, forbidden):
    proc, modules = imported_by(argv, tmp_path, extra_env)
    assert proc.returncode == code, proc.stderr
    assert says in proc.stdout, proc.stdout
    assert worked in modules, f"{worked} not imported: the command did not do its real work"
    loaded = sorted(name for name in modules if any(name == top or name.startswith(top + ".") for top in forbidden))
    assert not loaded, f"`c3 {' '.join(argv)}` imported {loaded}"


def test_the_command_list_is_the_one_click_draws_from_the_commands_themselves():
    """`c3 --help` lists the summaries kept in c3.cli (so it imports no command): they must read as
    the commands' own help would, at any terminal width."""
    import click

    from c3.cli import COMMANDS, SUMMARIES, cli

    assert set(SUMMARIES) == set(COMMANDS)
    ctx = click.Context(cli, info_name="c3")
    for width in (40, 80, 120, 200):
        listed, own = click.HelpFormatter(width=width), click.HelpFormatter(width=width)
        cli.format_commands(ctx, listed)
        click.Group.format_commands(cli, ctx, own)  # click's listing, from the imported commands
        assert listed.getvalue() == own.getvalue()


@pytest.mark.parametrize(("argv", "code"), [(["--help"], 0), (["fit", "--help"], 0), (["pod", "list", "-h"], 0), (["--version"], 0),
                                           (["catalog"], 2), (["fit", "vllm/qwen3-8b", "--card", "rtx-3090"], 2)])
def test_a_page_answers_with_a_bad_variable_that_every_command_still_refuses(tmp_path, argv, code):
    """Help pages and --version read no setting, so a malformed C3_* does not stop them; a command
    that runs still refuses it with one line, exit 2, before it does anything."""
    env = {**os.environ, "C3_HOME": str(tmp_path), "C3_RUNTIME": "kubernetes"}
    proc = subprocess.run([sys.executable, "-m", "c3", *argv], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stderr
    if code == 0:
        assert proc.stdout and not proc.stderr
    else:
        assert not proc.stdout and proc.stderr.startswith("c3: error: C3_RUNTIME is not valid"), proc.stderr


@pytest.mark.parametrize("package", ["backend.actions", "backend.models", "backend.estate", "backend.live", "backend.runtime", "backend.views"])
def test_a_lazily_exported_name_is_there_when_asked_for(package):
    """These packages load their names on first use (PEP 562) so a command imports only what it
    reads; every name they export must still resolve, and nothing else may."""
    import importlib

    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    with pytest.raises(AttributeError):
        _ = module.NoSuchName
