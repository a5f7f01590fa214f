"""`c3 demo` / `c3` terminal options, and leaving cleanly when the terminal hangs up (SIGHUP)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from c3.cli import cli
from c3.cli.cockpit import COLOR_SYSTEMS, configure_terminal
from tests.cockpit.test_tmux_smoke import ROOT, Tmux

C3 = os.path.join(os.path.dirname(sys.executable), "c3")


def test_demo_help_lists_the_terminal_options():
    result = CliRunner().invoke(cli, ["demo", "--help"])
    assert result.exit_code == 0
    for option in ("--readonly", "--color", "--no-mouse", "--ascii"):
        assert option in result.output
    assert "--ascii" in CliRunner().invoke(cli, ["--help"]).output


def test_color_maps_to_textual(monkeypatch):
    monkeypatch.delenv("TEXTUAL_COLOR_SYSTEM", raising=False)
    configure_terminal("256")
    assert os.environ["TEXTUAL_COLOR_SYSTEM"] == "256"
    configure_terminal("16")
    assert os.environ["TEXTUAL_COLOR_SYSTEM"] == "standard"
    assert set(COLOR_SYSTEMS) == {"auto", "truecolor", "256", "16"}


def test_bad_color_is_a_usage_error():
    result = subprocess.run([C3, "--color", "99"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "c3: error:" in result.stderr and "Traceback" not in result.stderr


def test_sighup_exits_cleanly(tmp_path, require_service):
    """A hangup (SSH dropped, terminal closed) ends c3 through its normal exit path: status 0."""
    require_service("tmux", shutil.which("tmux") is not None, "apt-get install tmux")
    env = f"C3_HOME={tmp_path / 'home'} C3_STATE={tmp_path / 'state'}"
    term = Tmux("hup", 100, 30, f"cd {ROOT} && env {env} {C3} demo --color 256 --no-mouse; echo C3-EXIT=$?; sleep 30")
    try:
        term.wait_for(r"No pods yet")
        shell = int(term.run("display", "-p", "-t", "hup", "#{pane_pid}").strip())
        children = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
        assert len(children) == 1, children
        os.kill(int(children[0]), signal.SIGHUP)
        term.wait_for(r"C3-EXIT=\d+", timeout=20)
        assert "C3-EXIT=0" in term.capture()
        assert "Traceback" not in term.capture()
    finally:
        term.kill()
