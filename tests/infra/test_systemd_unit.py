"""The one systemd unit writer, checked by systemd itself (`systemd-analyze verify` reads the units
as the manager would): hostile install paths and values survive, or are refused with one line."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from backend.errors import UsageError
from backend.systemd_unit import environment_line, exec_line

ANALYZE = shutil.which("systemd-analyze")
needs_systemd = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")

HOSTILE_DIR = "c3 dir 100%h $HOME;x"


def _hostile_c3(tmp_path: Path) -> str:
    folder = tmp_path / HOSTILE_DIR
    folder.mkdir()
    program = folder / "c3"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    return str(program)


def _verify(folder: Path) -> str:
    files = sorted(str(p) for p in folder.iterdir() if p.suffix in (".service", ".timer"))
    result = subprocess.run([ANALYZE, "verify", *files], capture_output=True, text=True, timeout=60)
    # Outside a booted systemd verify also talks about the environment; only lines on our files count.
    return "\n".join(line for line in (result.stdout + result.stderr).splitlines() if str(folder) in line or ".service" in line)


@needs_systemd
def test_cluster_units_with_a_hostile_install_path_are_read_back_by_systemd(tmp_path, monkeypatch):
    from backend.cluster.units import render_units, write_units

    monkeypatch.setenv("C3_HOME", str(tmp_path / "home 100%h"))
    c3 = _hostile_c3(tmp_path)
    out = tmp_path / "units"
    write_units(render_units(c3=c3, native_unit="vllm.service"), out)
    problems = _verify(out)
    assert problems == "", problems
    text = (out / "c3-cluster.service").read_text()
    assert '"C3_HOME=' + str(tmp_path / "home 100%%h") + '"' in text  # a specifier in a value is escaped


@needs_systemd
def test_pool_unit_with_a_hostile_install_path_is_read_back_by_systemd(tmp_path, monkeypatch):
    from backend.pool import service

    c3 = _hostile_c3(tmp_path)
    monkeypatch.setattr(service, "c3_executable", lambda: [c3])
    text = service.render_unit(["a"], ":8011", "header:x-$conv%n", 8011, system=True)
    out = tmp_path / "units"
    out.mkdir()
    (out / "c3-pool-8011.service").write_text(text)
    problems = _verify(out)
    assert problems == "", problems
    assert '"header:x-$$conv%%n"' in text


def test_values_are_escaped_per_directive():
    assert exec_line(["/usr/bin/c3", "a b", 'q"uote', "back\\slash", "$HOME", "100%"]) == (
        '/usr/bin/c3 "a b" "q\\"uote" "back\\\\slash" "$$HOME" 100%%'
    )
    # Environment= expands no variables: a `$` stays one `$`; a specifier is still escaped.
    assert environment_line("API_BASE", "http://x/$path?a=100%") == '"API_BASE=http://x/$path?a=100%%"'
    assert environment_line("C3_HOME", "/plain/path") == "C3_HOME=/plain/path"


@pytest.mark.parametrize("argv", [["/opt/it's/c3"], ['/opt/"q"/c3'], ["/opt/back\\slash/c3"], ["/usr/bin/c3", "line\nbreak"],
                                  ["/usr/bin/c3", "tab\there"]])
def test_what_a_unit_cannot_carry_is_refused_with_one_line(argv):
    with pytest.raises(UsageError) as refused:
        exec_line(argv)
    assert "\n" not in refused.value.message and refused.value.hint
