"""Integration: recipes launched over real SSH onto two test hosts, each with its own dockerd, the
stub engine as the recipe's engine with host networking."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.nodes.cluster_helpers import (
    ALT_PORT,
    HF_SECRET,
    PORT,
    SECRET,
    containers,
    http_status,
    ssh,
    wait_until,
)

pytestmark = [pytest.mark.netns, pytest.mark.docker, pytest.mark.sshd]


def _accepted(host) -> int:
    log = host.folder / "sshd.log"
    return log.read_text(errors="replace").count("Accepted publickey") if log.exists() else 0


def _args(cluster, host) -> list[str]:
    out = ssh(cluster.rig, host, "docker inspect --format '{{json .Args}}' c3-profile_stub-pair").stdout
    return json.loads(out)


def test_launch_on_two_nodes_then_status_logs_env_restart_stop(cluster, monkeypatch):
    monkeypatch.setenv("C3_API_KEY", SECRET)
    monkeypatch.setenv("HF_TOKEN", HF_SECRET)
    c3, h1, h2 = cluster.c3, cluster.h1, cluster.h2

    out = c3.ok("recipes", "launch", "stub-pair", "--nodes", "h1,h2", "--timeout", "60")
    assert "profile stub-pair is active" in out
    assert containers(cluster.rig, h1) == {"c3-profile_stub-pair": "running"}
    assert containers(cluster.rig, h2) == {"c3-profile_stub-pair": "running"}
    # Rank 0 serves on h1's own address (host networking inside h1's namespace), with the key; the
    # nodes were registered by DNS name, and the profile's endpoint is that name.
    base = f"http://{h1.dns_name}:{PORT}"
    assert http_status(base + "/v1/models") == 401
    # Each rank was told the address the nodes themselves reported (never the registered name).
    env2 = ssh(cluster.rig, h2, "docker inspect --format '{{json .Config.Env}}' c3-profile_stub-pair").stdout
    assert f"VLLM_HOST_IP={h2.address}" in env2 and f"NCCL_SOCKET_IFNAME=c3v{h2.subnet}i" in env2
    assert _args(cluster, h2)[_args(cluster, h2).index("--host") + 1] == h2.address
    assert http_status(base + "/v1/models", {"Authorization": f"Bearer {SECRET}"}) == 200
    assert http_status(f"http://127.0.0.1:{PORT}/health", timeout=1) is None
    # The secret went through a 0600 env file, never argv.
    env_file = h1.folder / "home" / ".c3" / "run" / "stub-pair-h1.env"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert SECRET not in json.dumps(_args(cluster, h1))
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            assert SECRET.encode() not in cmdline.read_bytes()
        except OSError:
            continue

    status = json.loads(c3.ok("profile", "status", "--json"))
    assert status["serving"] is True and status["status"] == "verified recipe"
    assert [(n["node"], n["rank"], n["state"]) for n in status["nodes"]] == [("h1", 0, "running"), ("h2", 1, "running")]
    assert "verified numbers: 1234 tok/s" in c3.ok("profile", "status")

    logs = c3.ok("profile", "logs", "--tail", "50")
    assert "Application startup complete" in logs
    assert "Application startup complete" in c3.ok("profile", "logs", "--node", "h2", "--tail", "50")

    env = c3.ok("profile", "env")
    shell = subprocess.run(["bash", "-c", 'eval "$(cat)"; echo "$OPENAI_BASE_URL $OPENAI_MODEL"'], input=env,
                           capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert shell.stdout.strip() == f"{base}/v1 stub"
    assert "C3_API_KEY" in env

    before = ssh(cluster.rig, h1, "docker inspect --format '{{.Id}}' c3-profile_stub-pair").stdout.strip()
    c3.ok("profile", "restart", "--timeout", "60")
    after = ssh(cluster.rig, h1, "docker inspect --format '{{.Id}}' c3-profile_stub-pair").stdout.strip()
    assert before and after and before != after
    assert http_status(base + "/health") == 200

    c3.ok("profile", "stop")
    assert containers(cluster.rig, h1) == {} and containers(cluster.rig, h2) == {}
    assert not env_file.exists()
    listed = json.loads(c3.ok("profile", "ls", "--json"))
    assert listed["profiles"][0]["stopped"] is True
    c3.assert_no_secret()


def test_dry_run_prints_every_command_and_no_secret(cluster, monkeypatch):
    monkeypatch.setenv("C3_API_KEY", SECRET)
    monkeypatch.setenv("HF_TOKEN", HF_SECRET)
    seen = (_accepted(cluster.h1), _accepted(cluster.h2))
    out = cluster.c3.ok("recipes", "launch", "stub-pair", "--nodes", "h1,h2", "--dry-run")
    assert "node h1 (rank 0, ssh root@" in out and "node h2 (rank 1, ssh root@" in out
    assert out.count("docker run -d --name c3-profile_stub-pair") == 2
    assert "VLLM_API_KEY=<redacted>" in out and "HF_TOKEN=<redacted>" in out and "--env-file" in out
    assert SECRET not in out and HF_SECRET not in out
    assert (_accepted(cluster.h1), _accepted(cluster.h2)) == seen  # no node was contacted
    assert not (Path(os.environ["C3_HOME"]) / "profiles" / "stub-pair.yaml").exists()
    assert containers(cluster.rig, cluster.h1) == {} and containers(cluster.rig, cluster.h2) == {}
    cluster.c3.assert_no_secret()


def test_override_demotes_and_reaches_the_command_line(cluster):
    c3 = cluster.c3
    c3.ok("recipes", "launch", "stub-pair", "--nodes", "h1,h2", "--set", "max_model_len=8192", "--timeout", "60")
    args = _args(cluster, cluster.h1)
    assert args[args.index("--max-model-len") + 1] == "8192"
    text = c3.ok("profile", "status")
    assert "recipe + local overrides" in text and "verified numbers" not in text
    assert "max_model_len=8192" in text

    seen = (_accepted(cluster.h1), _accepted(cluster.h2))
    refused = c3("profile", "set", "stub-pair", "max_model_len=100000")
    assert refused.returncode == 1 and "known to abort on netns-stub" in refused.stderr
    assert (_accepted(cluster.h1), _accepted(cluster.h2)) == seen
    c3.ok("profile", "set", "stub-pair", "max_model_len=2048")
    c3.ok("profile", "restart", "--timeout", "60")
    args = _args(cluster, cluster.h2)
    assert args[args.index("--max-model-len") + 1] == "2048"


def test_known_abort_is_refused_before_any_node_is_touched(cluster):
    seen = (_accepted(cluster.h1), _accepted(cluster.h2))
    result = cluster.c3("recipes", "launch", "stub-pair", "--nodes", "h1,h2", "--set", "max_model_len=131072")
    assert result.returncode == 1
    assert "known to abort on netns-stub" in result.stderr and result.stderr.startswith("c3: error:")
    assert "Traceback" not in result.stderr
    assert (_accepted(cluster.h1), _accepted(cluster.h2)) == seen


def test_unreachable_node_at_preflight_starts_nothing(cluster):
    c3 = cluster.c3
    c3.ok("node", "rm", "h2")
    c3.ok("node", "add", "h2", "--host", f"http://{cluster.h2.address}:{PORT}", "--ssh", f"root@{cluster.h2.address}:2222",
          "--ssh-key", str(cluster.rig.client_key))
    result = c3("recipes", "launch", "stub-pair", "--nodes", "h1,h2", "--timeout", "30")
    assert result.returncode == 3
    assert "c3: error: phase reach failed on node h2: unreachable" in result.stderr
    assert containers(cluster.rig, cluster.h1) == {}


async def test_node_lost_mid_launch_rolls_back_started_nodes(cluster, monkeypatch):
    """h2 passes the preflight, then its link goes down just before its `docker run`: the launch
    stops, names h2, and removes h1's already started container."""
    from backend.cluster.launch import launch
    from backend.cluster.plan import collect_secrets, render
    from backend.errors import C3Error
    from backend.nodes.registry import resolve_nodes
    from backend.profiles import active_name
    from backend.recipes import get_recipe
    from backend.remote.fleet import Fleet, open_shell
    from backend.remote.ssh import SshOptions

    link = f"c3v{cluster.h2.subnet}o"

    class CutBeforeRun:
        def __init__(self, shell):
            self._shell, self.node = shell, shell.node

        cut = False

        async def run(self, command, **kw):
            if isinstance(command, str) and command.startswith("docker run"):
                subprocess.run(["ip", "link", "set", link, "down"], check=True)
                self.cut = True
            if self.cut:
                # Only the lost node's commands are cut short: h1's keep their own limits, which a
                # loaded CI machine may need (a `docker run` there can take several seconds).
                kw["timeout"] = 4
            return await self._shell.run(command, **kw)

        async def put_file(self, *a, **kw):
            return await self._shell.put_file(*a, **kw)

        def stream(self, *a, **kw):
            return self._shell.stream(*a, **kw)

        async def close(self):
            await self._shell.close()

    async def opener(node, options):
        shell = await open_shell(node, options)
        return CutBeforeRun(shell) if node.name == "h2" else shell

    recipe = get_recipe("stub-pair")
    plan = render(recipe, resolve_nodes("h1,h2"), secrets=collect_secrets(recipe))
    fleet = Fleet([rp.node for rp in plan.ranks], SshOptions(), opener=opener)
    try:
        with pytest.raises(C3Error) as failure:
            await launch(plan, fleet=fleet, wait_timeout_s=30)
    finally:
        subprocess.run(["ip", "link", "set", link, "up"], check=False)
        await fleet.close()
    message = failure.value.message
    assert message.startswith("phase start failed on node h2:") and "timed out" in message
    assert "rolled back h1" in message
    assert containers(cluster.rig, cluster.h1) == {}
    assert active_name() is None


def test_watchdog_relaunches_a_dead_endpoint_but_not_after_a_deliberate_stop(cluster):
    c3, h1 = cluster.c3, cluster.h1
    c3.ok("recipes", "launch", "stub-pair", "--nodes", "h1,h2", "--timeout", "60")
    base = f"http://{h1.address}:{PORT}"
    check = ["profile", "watchdog-check", "--json", "--grace", "0", "--failures", "2", "--cooldown", "0"]
    assert json.loads(c3.ok(*check))["action"] == "ok"

    ssh(cluster.rig, h1, "docker kill c3-profile_stub-pair")
    wait_until(lambda: http_status(base + "/health", timeout=1) is None, 30, "rank 0 to stop answering")
    first = json.loads(c3.ok(*check))
    assert first["action"] == "failing" and first["failures"] == 1
    second = json.loads(c3.ok(*check))
    assert second["action"] == "relaunched"
    wait_until(lambda: http_status(base + "/health", timeout=1) == 200, 60, "the relaunched rank 0")
    assert containers(cluster.rig, h1) == {"c3-profile_stub-pair": "running"}
    assert json.loads(c3.ok(*check))["action"] == "ok"

    c3.ok("recipes", "stop", "stub-pair", "--nodes", "h1,h2")
    assert containers(cluster.rig, h1) == {}
    for _ in range(3):
        assert json.loads(c3.ok(*check))["action"] == "stopped"
    assert containers(cluster.rig, h1) == {} and containers(cluster.rig, cluster.h2) == {}

    # The next launch clears the remembered stop.
    c3.ok("recipes", "launch", "stub-pair", "--nodes", "h1,h2", "--timeout", "60")
    assert json.loads(c3.ok(*check))["action"] == "ok"


def test_switch_stops_the_active_profile_before_starting_another(cluster):
    c3, h1 = cluster.c3, cluster.h1
    c3.ok("recipes", "launch", "stub-alt", "--nodes", "h1,h2", "--timeout", "60")
    c3.ok("profile", "stop")
    c3.ok("recipes", "launch", "stub-pair", "--nodes", "h1,h2", "--timeout", "60")
    assert containers(cluster.rig, h1) == {"c3-profile_stub-pair": "running"}

    c3.ok("profile", "switch", "stub-alt", "--timeout", "60")
    assert containers(cluster.rig, h1) == {"c3-profile_stub-alt": "running"}
    assert http_status(f"http://{h1.address}:{ALT_PORT}/health") == 200
    assert http_status(f"http://{h1.address}:{PORT}/health", timeout=1) is None
    listed = json.loads(c3.ok("profile", "ls", "--json"))
    assert listed["active"] == "stub-alt"
    assert {p["name"]: p["stopped"] for p in listed["profiles"]} == {"stub-alt": False, "stub-pair": True}

    # A switch to a profile that could not start (its image is not on the nodes) is refused by that
    # profile's preflight before the active one is touched: stub-alt keeps serving.
    import yaml

    path = Path(os.environ["C3_HOME"]) / "profiles" / "stub-pair.yaml"
    data = yaml.safe_load(path.read_text())
    data["overrides"] = {**(data.get("overrides") or {}), "image": "sha256:" + "0" * 64}
    path.write_text(yaml.safe_dump(data))
    refused = c3("profile", "switch", "stub-pair", "--timeout", "60")
    assert refused.returncode == 1 and "phase image failed on node h1: image `sha256:000" in refused.stderr and "is not on the node" in refused.stderr, refused.stderr
    assert containers(cluster.rig, h1) == {"c3-profile_stub-alt": "running"}
    assert http_status(f"http://{h1.address}:{ALT_PORT}/health") == 200
    assert json.loads(c3.ok("profile", "ls", "--json"))["active"] == "stub-alt"


def test_each_failing_node_kind_names_the_node_and_leaves_nothing_running(cluster, tmp_path):
    c3, rig = cluster.c3, cluster.rig
    # Docker error: the image is not on the nodes → refused at preflight, with how to ship it.
    missing = c3("recipes", "launch", "stub-pair", "--nodes", "h1,h2", "--set", "image=sha256:" + "0" * 64)
    assert missing.returncode == 1 and "c3: error: phase image failed on node h1: image `sha256:000" in missing.stderr
    assert "docker save" in missing.stderr and "docker load" in missing.stderr
    # The engine dies while booting → both ranks rolled back, the node named.
    crashed = c3("recipes", "launch", "stub-crash", "--nodes", "h1,h2", "--timeout", "60")
    assert crashed.returncode == 1 and "c3: error: phase load failed on node h" in crashed.stderr
    assert "container exited" in crashed.stderr and "rolled back h1, h2" in crashed.stderr
    assert "c3: last lines from h" in crashed.stderr  # the dead rank's own log lines
    assert containers(rig, cluster.h1) == {} and containers(rig, cluster.h2) == {}
    # Authentication refused: a key the node does not know.
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    c3.ok("node", "rm", "h2")
    c3.ok("node", "add", "h2", "--host", f"http://{cluster.h2.address}:{PORT}", "--ssh", cluster.h2.ssh_target, "--ssh-key", str(other))
    refused = c3("recipes", "launch", "stub-pair", "--nodes", "h1,h2", "--timeout", "30")
    assert refused.returncode == 3 and "c3: error: phase reach failed on node h2: authentication refused" in refused.stderr
    assert containers(rig, cluster.h1) == {}
    assert all("Traceback" not in out for out in c3.outputs)


def test_launching_another_recipe_stops_the_active_one_and_an_edited_profile_still_stops(cluster):
    """One active profile: `recipes launch` of a second recipe stops the first (seed's switch), and a
    known-abort value edited into the running profile does not lock `profile status/logs/stop`."""
    import yaml

    c3, h1, h2 = cluster.c3, cluster.h1, cluster.h2
    c3.ok("recipes", "launch", "stub-pair", "--nodes", "h1,h2", "--timeout", "60")
    dry = c3.ok("recipes", "launch", "stub-alt", "--nodes", "h1,h2", "--dry-run")
    assert "first: stop the active profile stub-pair" in dry
    assert containers(cluster.rig, h1) == {"c3-profile_stub-pair": "running"}  # the dry run changed nothing

    out = c3.ok("recipes", "launch", "stub-alt", "--nodes", "h1,h2", "--timeout", "60")
    assert "stopping the active profile stub-pair first" in out
    assert containers(cluster.rig, h1) == {"c3-profile_stub-alt": "running"}
    assert containers(cluster.rig, h2) == {"c3-profile_stub-alt": "running"}
    listed = json.loads(c3.ok("profile", "ls", "--json"))
    assert listed["active"] == "stub-alt"
    assert {p["name"]: p["stopped"] for p in listed["profiles"]} == {"stub-alt": False, "stub-pair": True}

    # Edit a value the recipe refuses (known to abort) into the running profile, and remove the recipe.
    path = Path(os.environ["C3_HOME"]) / "profiles" / "stub-alt.yaml"
    data = yaml.safe_load(path.read_text())
    data["overrides"] = {"max_model_len": 10**6}
    path.write_text(yaml.safe_dump(data))
    status = json.loads(c3.ok("profile", "status", "--json"))
    assert status["serving"] is True and [n["state"] for n in status["nodes"]] == ["running", "running"]
    assert "Application startup complete" in c3.ok("profile", "logs", "--tail", "50")
    c3.ok("profile", "stop")
    assert containers(cluster.rig, h1) == {} and containers(cluster.rig, h2) == {}
