"""Issue 16, case by case: each hostile file or failing part the issue lists, through the real `c3`.

Each test names the case; each failed before the fix (hang, traceback, MemoryError or a silent pass).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from tests.hostile.helpers import AT_ONCE_S, bomb_estate, fill, remount_readonly, run, small_tmpfs, snapshot

RIG = """\
gpus:
  - {name: "NVIDIA GeForce RTX 3090", total_mib: 24576, sm: "8.6", reserved_mib: 422}
  - {name: "NVIDIA GeForce RTX 3090", total_mib: 24576, sm: "8.6", reserved_mib: 422}
"""
ESTATE = "schema_version: 1\nestate:\n  - name: chat\n    slug: vllm/qwen3-8b\n    gpus: [0]\n    port: 28081\n"
NODE = {"name": "n1", "host": "http://127.0.0.1:28999", "ssh": "root@127.0.0.1"}


@pytest.fixture
def home() -> Path:
    path = Path(os.environ["C3_HOME"])
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def rig(tmp_path: Path, monkeypatch) -> Path:
    from tests.support import use_rig

    return use_rig(tmp_path, monkeypatch, RIG)


def nodes_json(home: Path, *nodes: dict, raw: str | None = None) -> Path:
    path = home / "nodes.json"
    path.write_text(raw if raw is not None else json.dumps({"schema_version": 1, "nodes": list(nodes)}))
    path.chmod(0o600)
    return path


# --- YAML bombs, duplicate keys ---------------------------------------------------------------


def test_alias_bomb_in_the_estate_is_refused_at_once(home):
    (home / "estate.yml").write_text(bomb_estate())
    r = run("pod", "list")
    assert r.rc == 2 and not r.timed_out and r.seconds < AT_ONCE_S, (r.rc, r.seconds)
    assert "alias `*a` is not accepted" in r.error_line() and "line 2" in r.error_line()


def test_alias_bomb_in_catalog_d_is_refused_at_once(home):
    (home / "catalog.d").mkdir()
    (home / "catalog.d" / "bomb.yaml").write_text(bomb_estate().replace("schema_version", "entries: [*i]\nx"))
    for argv in (("catalog",), ("fit", "vllm/qwen3-8b", "--card", "rtx-3090")):
        r = run(*argv)
        assert r.rc == 2 and r.seconds < AT_ONCE_S and "catalog file" in r.error_line() and "alias" in r.error_line()


def test_duplicate_key_inside_one_entry_is_refused_with_its_line(home):
    (home / "estate.yml").write_text(ESTATE + "    port: 28082\n")
    r = run("pod", "list")
    assert r.rc == 2 and "line 7" in r.error_line() and "duplicate key `port` (first at line 6)" in r.error_line()
    assert run("pod", "validate").rc == 2


# --- special files ----------------------------------------------------------------------------


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "/dev/urandom", "dir"])
def test_fifo_devices_and_directories_as_the_estate_never_hang(tmp_path, special):
    if special == "fifo":
        target = tmp_path / "fifo"
        os.mkfifo(target)
    elif special == "dir":
        target = tmp_path
    else:
        target = Path(special)
    r = run("pod", "list", "--file", str(target))
    assert not r.timed_out and r.seconds < AT_ONCE_S and r.rc == 2
    assert "not a regular file" in r.error_line() or "is a directory" in r.error_line()


def test_a_symlinked_estate_is_written_through_and_stays_a_link(tmp_path, home, rig):
    real = tmp_path / "dotfiles" / "estate.yml"
    real.parent.mkdir()
    real.write_text("# my pods\n" + ESTATE)
    (home / "estate.yml").symlink_to(real)
    r = run("pod", "create", "second", "--gpus", "1", "--slug", "vllm/qwen3-8b", "--port", "28090", "--force")
    assert r.rc == 0, r.err
    assert (home / "estate.yml").is_symlink() and os.readlink(home / "estate.yml") == str(real)
    names = [p["name"] for p in yaml.safe_load(real.read_text())["estate"]]
    assert names == ["chat", "second"]
    assert real.read_text().startswith("# my pods\n")


# --- file systems that refuse -----------------------------------------------------------------


def test_c3_state_pointing_at_a_file_is_one_line_exit_3(tmp_path, home, rig):
    (home / "estate.yml").write_text(ESTATE)
    state = tmp_path / "state-file"
    state.write_text("x")
    r = run("pod", "up", "chat", env={"C3_STATE": str(state)})
    assert r.rc == 3 and str(state) in r.error_line(), r.err
    assert state.read_text() == "x"


@pytest.mark.parametrize("how", ["readonly", "full"])
def test_pod_up_on_a_readonly_or_full_state_is_one_line_exit_3(tmp_path, home, rig, how, require_service):
    (home / "estate.yml").write_text(ESTATE)
    with small_tmpfs(tmp_path / "mnt", require=require_service) as state:
        if how == "readonly":
            remount_readonly(state)
        else:
            fill(state)
        r = run("pod", "up", "chat", env={"C3_STATE": str(state)})
        assert r.rc == 3 and str(state) in r.error_line(), r.err
        assert ("read-only" if how == "readonly" else "no space left") in r.error_line()


@pytest.mark.parametrize("how", ["readonly", "full"])
def test_node_rm_and_pod_create_on_a_readonly_or_full_home_are_exit_3_and_write_nothing(tmp_path, monkeypatch, how, rig, require_service):
    with small_tmpfs(tmp_path / "home", require=require_service) as home:
        nodes_json(home, NODE)
        (home / "estate.yml").write_text(ESTATE)
        monkeypatch.setenv("C3_HOME", str(home))
        if how == "readonly":
            remount_readonly(home)
        else:
            fill(home)
        before = {k: v for k, v in snapshot(home).items() if k != ".filler"}
        for argv in (("node", "rm", "n1"), ("pod", "create", "two", "--gpus", "1", "--slug", "vllm/qwen3-8b", "--force"),
                     ("node", "add", "n2", "--host", "http://127.0.0.1:1", "--ssh", "root@127.0.0.1")):
            r = run(*argv)
            assert r.rc == 3 and str(home) in r.error_line(), (argv, r.err)
        assert {k: v for k, v in snapshot(home).items() if k != ".filler"} == before


# --- nodes.json -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"schema_version": 1, "nodes": [], "x": ' + "9" * 5001 + "}", "JSON cannot read"),
        ('{"schema_version": 1, "nodes": [], "nodes": []}', "duplicate key `nodes`"),
    ],
    ids=["deep", "huge-int", "dup-key"],
)
def test_hostile_nodes_json_is_one_line_exit_2(home, raw, expected):
    nodes_json(home, raw=raw)
    for argv in (("node", "ls"), ("node", "add", "n2", "--host", "http://127.0.0.1:1", "--ssh", "root@127.0.0.1")):
        r = run(*argv)
        assert r.rc == 2 and expected in r.error_line() and r.seconds < AT_ONCE_S


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("http://127.0.0.1:99999", "port"),
        ("http://127.0.0.1:abc", "port"),
        ("http://bad host:80", "host"),
        ("http://admin:hunter2@127.0.0.1:8000", "credentials"),
    ],
)
def test_node_urls_node_add_refuses_are_refused_in_nodes_json_too(home, host, expected):
    r = run("node", "add", "n2", "--host", host, "--ssh", "root@127.0.0.1")
    assert r.rc == 2 and expected in r.error_line() and "hunter2" not in r.err
    nodes_json(home, dict(NODE, host=host))
    for argv in (("node", "ls"), ("pool", "serve", "--nodes", "n1", "--bind", "127.0.0.1:28998")):
        r = run(*argv)
        assert r.rc == 2 and expected in r.error_line() and "hunter2" not in r.err + r.out, (argv, r.err)


def test_duplicate_node_names_and_bad_ssh_targets_in_nodes_json_are_refused(home):
    nodes_json(home, NODE, dict(NODE, host="http://127.0.0.1:28997"))
    assert "appears twice" in run("node", "ls").error_line()
    nodes_json(home, dict(NODE, ssh="root@host:70000"))
    assert "port outside" in run("node", "ls").error_line()


# --- c3 serve goes through the fit-check and required_sm ------------------------------------


def test_serve_refuses_what_pod_create_refuses(home, rig):
    r = run("serve", "vllm/gpt-oss-120b", "--gpus", "0")
    assert r.rc == 1 and "wont-fit" in r.error_line()
    r = run("serve", "vllm/qwen3-next-80b-fp8-tp2", "--gpus", "0,1", "--force")  # --force never passes the hardware
    assert r.rc == 1 and "is below sm 8.9" in r.error_line()
    assert "serving" not in r.out and not list((Path(os.environ["C3_STATE"])).rglob("serve-*"))


def test_serve_maps_a_gpu_count_to_the_tp_variant_or_says_none_exists(home, rig):
    r = run("serve", "vllm/qwen3-8b", "--gpus", "0,1")
    assert r.rc == 2 and "no TP=2 variant" in r.error_line()


# --- one pod name in two estate files ---------------------------------------------------------


def test_same_pod_name_in_another_estate_is_reported_not_called_running(tmp_path, home, rig):
    (home / "catalog.d").mkdir()
    (home / "catalog.d" / "stub.yaml").write_text(yaml.safe_dump({"entries": [{
        "slug": "custom/stub", "engine": "custom", "image": "c3-stub:test", "container_port": 8000, "health_path": "/v1/models",
        "command": ["python3", "/opt/c3/stub_engine.py", "--port", "8000"], "tp": 1}]}))
    from tests.support import free_port

    a, b = tmp_path / "a.yml", tmp_path / "b.yml"
    pa, pb = free_port(), free_port()
    a.write_text(ESTATE.replace("vllm/qwen3-8b", "custom/stub").replace("28081", str(pa)))
    b.write_text(ESTATE.replace("vllm/qwen3-8b", "custom/stub").replace("28081", str(pb)).replace("[0]", "[1]"))
    try:
        up = run("pod", "up", "chat", "--file", str(a), deadline=60)
        assert up.rc == 0, up.out + up.err
        other = run("pod", "up", "chat", "--file", str(b), deadline=20)
        assert other.rc == 1 and f"runs from estate {a}" in other.error_line() and "already running" not in other.out
        status = json.loads(run("pod", "status", "--json", "--file", str(b), deadline=20).out)
        (row,) = status["pods"]
        assert (row["state"], row["running"], row["other_estate"]) == ("other-estate", False, str(a))
        assert [(u["name"], u["estate"], u["port"]) for u in status["unplanned"]] == [("chat", str(a), pa)]
        mine = json.loads(run("pod", "status", "--json", "--file", str(a), deadline=20).out)
        assert mine["pods"][0]["running"] is True and mine["unplanned"] == []
        # The cockpit on b.yml (`c3 --file b.yml`) does not show a.yml's container as its pod either.
        from c3.services_real import build_services

        services = build_services(estate_path=b)
        try:
            (state,) = services.pod_states()
            assert state.name == "chat" and state.state == "down" and f"belongs to estate {a}" in state.placement_detail
        finally:
            services.close()
        # `pod down chat --file b.yml` must not stop a.yml's pod; with a.yml it does, and says whose it was.
        refused = run("pod", "down", "chat", "--file", str(b), deadline=20)
        assert refused.rc == 1 and f"started from {a}" in refused.error_line()
        assert json.loads(run("pod", "status", "--json", "--file", str(a), deadline=20).out)["pods"][0]["running"] is True
        down = run("pod", "down", "chat", "--file", str(a), deadline=60)
        assert down.rc == 0 and f"stopped (from {a})" in down.out
    finally:
        run("pod", "down", "chat", deadline=60)


# --- readiness --------------------------------------------------------------------------------


def test_readiness_tells_auth_required_from_loading(monkeypatch):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from backend.runtime.readiness import probe_health

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            ok = self.headers.get("Authorization") == "Bearer k1"
            self.send_response(200 if ok else 401)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/models"
        monkeypatch.delenv("VLLM_API_KEY", raising=False)
        assert probe_health(url) == "auth"
        monkeypatch.setenv("VLLM_API_KEY", "k1")
        assert probe_health(url) == "ready"
    finally:
        server.shutdown()


def test_wait_ready_ends_at_once_on_auth_with_a_hint():
    from backend.runtime.models import Workload
    from backend.runtime.readiness import wait_ready

    result = wait_ready(url="u", workload=lambda: Workload(pod="p", status="running"), logs=lambda n: "", timeout_s=600,
                        sleep=lambda s: None, health=lambda u: "auth")
    assert not result.ok and result.phase == "auth" and "VLLM_API_KEY" in result.detail
