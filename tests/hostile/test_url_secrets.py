"""Issue 25: a password in a malformed node URL or SSH target is never echoed, through the real `c3`.

Well-formed `http://user:pass@host` was masked; the malformed forms below were echoed whole in the
`c3: error:` line (16 cases before the redaction was made parse-free in backend.models.names).
"""

from __future__ import annotations

import json

import pytest

from tests.hostile.helpers import run

SECRET = "S3cr3tPW"
URLS = [
    f"http:/u:{SECRET}@h:8000", f"http:\\\\u:{SECRET}@h:8000", f"http://u:pa/{SECRET}@h:8000", f"u:{SECRET}@h:8000",
    f"http://h:8000/v1?password={SECRET}", f"http://h:8000/#{SECRET}", f"http://u:{SECRET}@h:8000", f"http://u:pa?{SECRET}@h:8000",
    f"http://u:pa@{SECRET}@h:8000", f"//u:{SECRET}@h:8000", f"HTTP:\\u:{SECRET}@h", f"http://u:{'x' * 300}{SECRET}@h:8000",
]
TARGETS = [f"u:{SECRET}@h", f"u:{SECRET}@h:99999", f"u:pa@{SECRET}@h", f"u:{SECRET}@[::1"]


def refused_quietly(r) -> None:
    assert r.rc == 2 and r.error_line(), (r.rc, r.err)
    assert SECRET not in r.out + r.err, r.err


@pytest.mark.parametrize("url", URLS)
def test_a_password_in_a_malformed_host_url_is_not_echoed(url):
    refused_quietly(run("node", "add", "n1", "--host", url, "--ssh", "root@127.0.0.1"))


@pytest.mark.parametrize("target", TARGETS)
def test_a_password_in_an_ssh_target_is_not_echoed(target):
    refused_quietly(run("node", "add", "n1", "--host", "http://127.0.0.1:8000", "--ssh", target))


@pytest.mark.parametrize(("host", "ssh"), [(URLS[0], "root@127.0.0.1"), (URLS[4], "root@127.0.0.1"), ("http://127.0.0.1:8000", TARGETS[0])])
def test_a_password_in_nodes_json_is_not_echoed(home, host, ssh):
    path = home / "nodes.json"
    path.write_text(json.dumps({"schema_version": 1, "nodes": [{"name": "n1", "host": host, "ssh": ssh}]}))
    path.chmod(0o600)
    refused_quietly(run("node", "ls"))
