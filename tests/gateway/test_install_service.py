"""`c3 gateway install-service`: a systemd unit that runs the gateway (user or system), never holding a
secret (keys come from an EnvironmentFile), refusing to replace a different unit without --force
(issue 28). Units go to a temporary folder: the real /etc and ~/.config are never touched."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

KEY = "gw-s3cret-key-0123456789"
ENGINE_KEY = "vllm-s3cret-0123456789"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home, state = tmp_path / "home", tmp_path / "state"
    home.mkdir()
    (home / "estate.yml").write_text("schema_version: 1\nestate: []\n")
    return {**os.environ, "C3_HOME": str(home), "C3_STATE": str(state), "C3_GATEWAY_API_KEY": KEY, "VLLM_API_KEY": ENGINE_KEY,
            "XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def c3(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "c3", "gateway", "install-service", *args], capture_output=True, text=True, env=env, timeout=60)


def _no_secret(r: subprocess.CompletedProcess[str]) -> None:
    for secret in (KEY, ENGINE_KEY):
        assert secret not in r.stdout and secret not in r.stderr


def test_dry_run_prints_the_unit_and_writes_nothing(env, tmp_path):
    units = tmp_path / "units"
    r = c3(env, "--user", "--bind", "127.0.0.1:8099", "--swap-wait", "30", "--unit-dir", str(units), "--dry-run")
    assert r.returncode == 0, r.stderr
    _no_secret(r)
    assert not units.exists()
    home = env["C3_HOME"]
    assert r.stdout.startswith(f"# {units}/c3-gateway-8099.service\n")
    [exec_start] = [line for line in r.stdout.splitlines() if line.startswith("ExecStart=")]
    assert exec_start.endswith(f" gateway serve --bind 127.0.0.1:8099 --file {home}/estate.yml --swap-wait 30")
    assert f"EnvironmentFile=-{home}/gateway.env" in r.stdout.splitlines()
    assert f'Environment=C3_HOME={home}' in r.stdout and "WantedBy=default.target" in r.stdout
    assert "# dry run: nothing written" in r.stdout


def test_install_writes_verifies_and_refuses_to_replace_a_different_unit(env, tmp_path):
    units = tmp_path / "units"
    path = units / "c3-gateway-8012.service"
    r = c3(env, "--user", "--unit-dir", str(units))
    assert r.returncode == 0, r.stderr
    _no_secret(r)
    text = path.read_text()
    assert "gateway serve --bind 127.0.0.1:8012" in text and KEY not in text and ENGINE_KEY not in text
    assert f"wrote {path}" in r.stdout and "systemctl --user daemon-reload" in r.stdout
    if shutil.which("systemd-analyze"):
        assert "# systemd-analyze verify: ok" in r.stdout
    again = c3(env, "--user", "--unit-dir", str(units))  # the same unit: nothing to do
    assert again.returncode == 0 and f"{path} is already this unit" in again.stdout, again.stderr
    other = c3(env, "--user", "--unit-dir", str(units), "--idle-ttl", "600")
    assert other.returncode == 1 and other.stderr.startswith(f"c3: error: {path} exists and is a different unit"), other.stderr
    assert "hint:" in other.stderr and "--force" in other.stderr and "Traceback" not in other.stderr
    assert path.read_text() == text
    forced = c3(env, "--user", "--unit-dir", str(units), "--idle-ttl", "600", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "--idle-ttl 600" in path.read_text()


def test_a_system_unit(env, tmp_path):
    units = tmp_path / "etc"
    r = c3(env, "--system", "--unit-dir", str(units), "--bind", ":8012")
    assert r.returncode == 0, r.stderr
    text = (units / "c3-gateway-8012.service").read_text()
    assert "WantedBy=multi-user.target" in text and "--bind :8012" in text
    assert "systemctl daemon-reload && systemctl enable --now c3-gateway-8012.service" in r.stdout


def test_an_environment_file_others_can_read_is_refused(env, tmp_path):
    env_file = Path(env["C3_HOME"]) / "gateway.env"
    env_file.write_text(f"C3_GATEWAY_API_KEY={KEY}\n")
    env_file.chmod(0o644)
    r = c3(env, "--unit-dir", str(tmp_path / "units"))
    assert r.returncode == 2 and r.stderr.startswith(f"c3: error: the environment file {env_file} can be read by others"), r.stderr
    assert f"hint: chmod 600 {env_file}" in r.stderr
    _no_secret(r)
    assert not (tmp_path / "units").exists()
    env_file.chmod(0o600)
    assert c3(env, "--unit-dir", str(tmp_path / "units")).returncode == 0
