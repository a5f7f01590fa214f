"""`c3 gateway litellm-config`: a LiteLLM proxy config for every name the gateway routes, pointing at the
gateway, with its key referenced from the environment, never written (issue 28)."""

from __future__ import annotations

import os
import subprocess
import sys

import yaml

from .conftest import create

KEY = "gw-s3cret-key-0123456789"


def c3(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "c3", *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=60)


def test_the_config_lists_every_routed_name_and_holds_no_secret(ws, gateway):
    create(ws, "chat", 0, on_demand=True)
    create(ws, "coder", 0, on_demand=True)
    r = c3("gateway", "litellm-config", "--file", str(ws.estate_path), C3_GATEWAY_API_KEY=KEY)
    assert r.returncode == 0, r.stderr
    assert KEY not in r.stdout and KEY not in r.stderr
    doc = yaml.safe_load(r.stdout)
    names = [m["model_name"] for m in doc["model_list"]]
    gw = gateway()  # the gateway's own /v1/models lists exactly these names
    _, _, body = gw.request("GET", "/v1/models")
    assert names == [m["id"] for m in yaml.safe_load(body)["data"]]
    assert names[:2] == ["chat", "coder"] and "Qwen/Qwen3-8B" in names and "vllm/qwen3-8b" in names
    for entry in doc["model_list"]:
        assert entry["litellm_params"] == {"model": f"openai/{entry['model_name']}", "api_base": "http://127.0.0.1:8012/v1",
                                           "api_key": "os.environ/C3_GATEWAY_API_KEY"}
    assert r.stdout.startswith("# LiteLLM proxy config for the c3 gateway at http://127.0.0.1:8012")


def test_another_address_and_key_variable(ws):
    create(ws, "chat", 0)
    r = c3("gateway", "litellm-config", "--url", "http://10.0.0.5:9000/", "--api-key-env", "MY_GW_KEY", "--file", str(ws.estate_path))
    assert r.returncode == 0, r.stderr
    [first, *_] = yaml.safe_load(r.stdout)["model_list"]
    assert first["litellm_params"] == {"model": "openai/chat", "api_base": "http://10.0.0.5:9000/v1", "api_key": "os.environ/MY_GW_KEY"}


def test_bad_input_is_one_error_line(ws, tmp_path):
    create(ws, "chat", 0)
    for args, says in ((("--url", "ftp://x"),), "--url must be an http:// or https:// address"), \
                      ((("--url", "http://user:pw@host:8012"),), "--url must not carry a user or password"), \
                      ((("--api-key-env", "1BAD"),), "is not a valid variable name"):
        r = c3("gateway", "litellm-config", *args[0], "--file", str(ws.estate_path))
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.startswith("c3: error: ") and says in r.stderr and "hint:" in r.stderr and "pw" not in r.stderr, r.stderr
    r = c3("gateway", "litellm-config", "--file", str(tmp_path / "none.yml"))
    assert r.returncode == 1 and r.stderr.startswith("c3: error: ") and "no pod" in r.stderr, r.stderr
