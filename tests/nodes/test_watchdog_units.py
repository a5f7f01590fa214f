"""The watchdog's decision logic (fake probe, fake relaunch) and the systemd units it ships with."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from backend.cluster import watchdog
from backend.cluster.units import render_units, verify_units, write_units
from backend.profiles import Profile, mark_stopped, save_profile, set_active


@pytest.fixture
def profile(tmp_path):
    p = Profile(name="p", recipe="gone", recipe_digest="d", nodes=["a"], base_url="http://127.0.0.1:1/v1", model="m",
                launched_at=datetime.fromtimestamp(1000, UTC).isoformat())
    save_profile(p)
    set_active("p")
    return p


def _round(answer: bool, now: float, relaunched: list, **kw):
    return watchdog.check(probe_fn=lambda url, path, t: (answer, "probe"), relaunch=lambda p: relaunched.append(now),
                          now=now, **kw)


def test_consecutive_failures_grace_and_cooldown(profile):
    relaunched: list[float] = []
    kw = dict(failures=3, grace_s=100, cooldown_s=500)
    assert _round(False, 1050, relaunched, **kw).action == "grace"       # 50 s after launch
    assert _round(False, 1200, relaunched, **kw).action == "failing"
    assert _round(True, 1210, relaunched, **kw).action == "ok"            # a success resets the count
    assert [_round(False, 1220 + i, relaunched, **kw).action for i in range(3)] == ["failing", "failing", "relaunched"]
    assert relaunched == [1222]
    # Right after a relaunch: inside the grace period again, then the cooldown holds back another relaunch.
    assert _round(False, 1250, relaunched, **kw).action == "grace"
    assert [_round(False, 1400 + i, relaunched, **kw).action for i in range(3)] == ["failing", "failing", "cooldown"]
    assert _round(False, 1800, relaunched, **kw).action == "relaunched"
    assert relaunched == [1222, 1800]


def test_deliberate_stop_is_left_alone(profile):
    relaunched: list[float] = []
    mark_stopped("p", "test")
    for i in range(5):
        assert _round(False, 5000 + i, relaunched, failures=1, grace_s=0, cooldown_s=0).action == "stopped"
    assert relaunched == []


def test_no_active_profile():
    assert watchdog.check(probe_fn=lambda *a: (False, "x")).action == "no-profile"


def test_units_render_verify_and_install_service_cli(tmp_path, require_service):
    units = {u.name: u.text for u in render_units(c3="/usr/local/bin/c3", native_unit="vllm.service")}
    cluster = units["c3-cluster.service"]
    assert "Conflicts=vllm.service" in cluster and "ExecStart=/usr/local/bin/c3 profile restart --no-wait" in cluster
    assert "ExecStop=/usr/local/bin/c3 profile stop" in cluster
    assert "profile watchdog-check --failures 3 --cooldown 600" in units["c3-cluster-watchdog.service"]
    assert "OnUnitActiveSec=30s" in units["c3-cluster-watchdog.timer"]
    assert "KEY" not in cluster.upper().replace("C3_HOME", "")  # no key in a unit: EnvironmentFile only

    require_service("systemd-analyze", shutil.which("systemd-analyze") is not None, "apt-get install systemd")
    written = write_units(render_units(c3=sys.executable), tmp_path / "units")
    verdict = verify_units(written)
    assert verdict is not None and verdict[0], verdict

    def run(*a: str, **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "c3", "recipes", "install-service", *a], capture_output=True, text=True, **kw)
    dry = run("--dry-run", "--unit-dir", str(tmp_path / "dry"))
    assert dry.returncode == 0 and "[Service]" in dry.stdout and "nothing written" in dry.stdout
    assert not (tmp_path / "dry").exists()
    unconfirmed = run("--unit-dir", str(tmp_path / "u2"), stdin=subprocess.DEVNULL)
    assert unconfirmed.returncode == 1 and not (tmp_path / "u2").exists()
    done = run("--yes", "--unit-dir", str(tmp_path / "u3"))
    assert done.returncode == 0, done.stderr
    assert "systemd-analyze verify: ok" in done.stdout
    assert sorted(p.name for p in (tmp_path / "u3").iterdir()) == [
        "c3-cluster-watchdog.service", "c3-cluster-watchdog.timer", "c3-cluster.service"]


def test_install_service_stands_the_native_unit_down_after_showing_it(tmp_path):
    """`install-service` shows the native unit's state and the exact command first, refuses without a
    TTY or --yes, then runs `systemctl disable --now` (here a stand-in systemctl that records its argv:
    this container runs no systemd) and says how to restore it."""
    bindir, log = tmp_path / "bin", tmp_path / "systemctl.log"
    bindir.mkdir()
    (bindir / "systemctl").write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {log}\n'
        'case "$1" in is-active) echo active;; is-enabled) echo enabled;; esac\n')
    (bindir / "systemctl").chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    def run(*a: str, **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "c3", "recipes", "install-service", *a, "--unit-dir", str(tmp_path / "units")],
                              capture_output=True, text=True, env=env, **kw)
    dry = run("--dry-run")
    assert dry.returncode == 0 and "vllm.service is active, enabled: it will be stood down: systemctl disable --now -- vllm.service" in dry.stdout
    assert "to restore it later: systemctl enable --now vllm.service" in dry.stdout
    refused = run(stdin=subprocess.DEVNULL)
    assert refused.returncode == 1 and "disable" not in log.read_text()
    done = run("--yes")
    assert done.returncode == 0, done.stderr
    assert "ran systemctl disable --now -- vllm.service (restore with: systemctl enable --now vllm.service)" in done.stdout
    assert "disable --now -- vllm.service" in log.read_text() and "enable --now" not in log.read_text().replace("disable --now", "")
    assert "is-active -- vllm.service" in log.read_text()
    none = run("--yes", "--native-unit", "")
    assert none.returncode == 0 and log.read_text().count("disable") == 1


@pytest.mark.parametrize("unit", ["--host=x@evil", "-H.service", "vllm", "a b.service", "x.service;reboot"])
def test_a_native_unit_that_is_not_a_unit_name_is_refused_before_systemctl_runs(tmp_path, unit):
    """Issue 24: `--native-unit=--host=x@evil` ran `systemctl is-active --host=x@evil`."""
    bindir, log = tmp_path / "bin", tmp_path / "systemctl.log"
    bindir.mkdir()
    (bindir / "systemctl").write_text(f'#!/bin/sh\necho "$*" >> {log}\necho active\n')
    (bindir / "systemctl").chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    for extra in (["--dry-run"], ["--yes"]):
        result = subprocess.run([sys.executable, "-m", "c3", "recipes", "install-service", f"--native-unit={unit}", *extra,
                                 "--unit-dir", str(tmp_path / "units")], capture_output=True, text=True, env=env, timeout=60)
        assert result.returncode == 2, (result.stdout, result.stderr)
        assert result.stderr.startswith("c3: error: --native-unit") and "is not a systemd unit name" in result.stderr
        assert "Traceback" not in result.stderr and not log.exists() and not (tmp_path / "units").exists()


@pytest.mark.parametrize("text", ["[]", "null", '"x"'])
def test_a_state_file_that_is_not_an_object_counts_as_no_state(profile, text):
    """A hand-edited or foreign state file is read as no state (found by mypy: it was used as a dict unchecked)."""
    path = watchdog._state_path("p")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    assert watchdog.read_state("p") == {}
    assert _round(False, 5000, [], failures=3, grace_s=0, cooldown_s=0).action == "failing"
