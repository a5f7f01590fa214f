"""The gateway's API key, and the `c3 gateway` commands' contract (one error line, no secret echoed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support import wait_until

from .conftest import create

KEY = "gw-s3cret-key-0123456789"


def test_api_key_required_when_configured_and_never_in_the_status(ws, gateway, tmp_path):
    create(ws, "chat", 0)
    gw = gateway(api_key=KEY)
    for headers in (None, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
        status, answer_headers, body = gw.request("GET", "/v1/models", headers=headers)
        assert status == 401 and answer_headers["www-authenticate"] == "Bearer" and KEY not in body.decode()
        assert gw.chat("chat", headers=headers)[0] == 401
    assert gw.control.starts == []  # an unauthenticated request starts nothing
    good = {"Authorization": f"Bearer {KEY}"}
    assert gw.request("GET", "/v1/models", headers=good)[0] == 200
    assert gw.chat("chat", headers=good)[0] == 200  # the engine got no gateway key (it needs none)
    files = list((tmp_path / "gateway").glob("*.json"))
    assert files and all(KEY not in f.read_text() for f in files) and json.loads(files[0].read_text())["auth"] is True


def c3(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, C3_GATEWAY_API_KEY="")
    return subprocess.run([sys.executable, "-m", "c3", *args], capture_output=True, text=True, env=env, timeout=60)


def test_a_key_file_others_can_read_is_refused_without_echoing_it(tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o644)
    done = c3("gateway", "serve", "--bind", "127.0.0.1:1", "--api-key-file", str(key_file))
    assert done.returncode == 2 and KEY not in done.stdout + done.stderr and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"c3: error: the API key file {key_file} can be read by others (mode 644)")
    assert "hint: chmod 600" in done.stderr


def test_status_without_a_gateway_and_bad_bind():
    done = c3("gateway", "status")
    assert done.returncode == 1 and done.stderr.startswith("c3: error: no gateway is running")
    assert json.loads(c3("gateway", "status", "--json").stdout) == {"gateways": []}
    bad = c3("gateway", "serve", "--bind", "nowhere:99999")
    assert bad.returncode == 2 and bad.stderr.startswith("c3: error: --bind") and "Traceback" not in bad.stderr


def test_status_lists_a_running_gateways_pods(ws, gateway):
    from backend.gateway.status import gateway_dir

    create(ws, "chat", 0)
    gateway(state_dir=gateway_dir())  # where `c3 gateway status` looks ($C3_STATE/gateway)
    wait_until(lambda: list(gateway_dir().glob("gateway-*.json")), 10, "the status file")
    done = c3("gateway", "status", "--json")
    [row] = json.loads(done.stdout)["gateways"][0]["models"]
    assert row["pod"] == "chat" and row["state"] == "stopped" and row["queue_depth"] == 0 and row["started_by_gateway"] is False
    text = c3("gateway", "status")
    assert text.returncode == 0 and "chat" in text.stdout and "stopped" in text.stdout
