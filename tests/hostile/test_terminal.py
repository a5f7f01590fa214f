"""Issue 25: names and values with terminal escapes and newlines, through the real `c3`.

Whatever a file, the user or a remote system wrote, no raw control byte may reach the terminal
(an OSC sequence sets the window title, CSI 2J clears the screen, U+009B is a one-byte CSI), and a
newline in a name must not split the one-line error. Each case failed before c3.cli.terminal.
"""

from __future__ import annotations

import json
import re

import yaml

from tests.hostile.helpers import run

EVIL = "x\x1b]0;pwned\x07\x1b[2J\x9b1m\nfake: line"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(r) -> None:
    for name, text in (("stdout", r.out), ("stderr", r.err)):
        assert not RAW.search(text), (r.argv, name, text[-500:])
    assert "Traceback" not in r.err, r.err[-2000:]


def test_an_escape_in_an_estate_pod_name_is_shown_not_obeyed(home):
    (home / "estate.yml").write_text(yaml.safe_dump({"schema_version": 1, "estate": [
        {"name": EVIL, "slug": "vllm/qwen3-8b", "gpus": [0], "port": 8000}]}))
    for argv in (("pod", "list"), ("pod", "validate"), ("pod", "rm", "chat")):
        r = run(*argv)
        clean(r)
        if r.rc:
            assert "\\x1b" in r.error_line() or "chat" in r.error_line(), r.err


def test_an_escape_in_a_catalog_d_entry_reaches_the_table_escaped(home):
    (home / "catalog.d").mkdir()
    (home / "catalog.d" / "evil.yaml").write_text(yaml.safe_dump({"entries": [{
        "slug": "custom/evil", "engine": "custom", "image": "x:1", "container_port": 8000, "health_path": "/v1/models",
        "command": ["/bin/x"], "tp": 1, "model": {"repo": EVIL}}]}))
    r = run("catalog")
    clean(r)
    bad = dict(yaml.safe_load((home / "catalog.d" / "evil.yaml").read_text()))
    bad["entries"][0]["slug"] = "custom/" + EVIL
    (home / "catalog.d" / "evil.yaml").write_text(yaml.safe_dump(bad))
    r = run("catalog")
    clean(r)
    assert r.rc == 2 and "\\x1b" in r.error_line()


def test_an_escape_in_a_rig_gpu_name_reaches_the_gpu_table_escaped(tmp_path):
    rig = tmp_path / "rig.yaml"
    rig.write_text(yaml.safe_dump({"gpus": [{"name": EVIL, "total_mib": 24576, "sm": "8.6"}]}))
    r = run("gpus", env={"C3_RIG": str(rig)})
    clean(r)
    assert r.rc == 0 and "\\x1b]0;pwned\\x07" in r.out, r.out + r.err


def test_an_escape_in_a_node_name_is_one_escaped_error_line(home):
    path = home / "nodes.json"
    path.write_text(json.dumps({"schema_version": 1, "nodes": [{"name": EVIL, "host": "http://127.0.0.1:28999", "ssh": "root@127.0.0.1"}]}))
    path.chmod(0o600)
    r = run("node", "ls")
    clean(r)
    assert r.rc == 2 and "\\x1b" in r.error_line()


def test_an_escape_in_an_argument_is_one_escaped_error_line(home):
    (home / "estate.yml").write_text("schema_version: 1\nestate: []\n")
    for argv in (("pod", "rm", EVIL), ("fit", EVIL, "--card", "rtx-3090"), ("recipes", "show", EVIL), ("profile", "status", EVIL)):
        r = run(*argv)
        clean(r)
        assert r.rc in (1, 2) and "\\x1b" in r.error_line() and "\\nfake: line" in r.error_line(), (argv, r.err)


def test_an_escape_in_a_config_json_is_one_escaped_error_line(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": EVIL, "architectures": [EVIL], "num_hidden_layers": "x" + EVIL}))
    r = run("fit", "--config", str(config), "--vram-gib", "24", "--tp", "1")
    clean(r)
    assert r.rc == 2 and r.error_line()
