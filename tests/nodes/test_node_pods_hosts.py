"""`c3 pod status --all-nodes` over the test hosts' real sshd and dockerd: the c3 pod containers of every
other registered node, marked by node, read through the SSH path `c3 node status` uses; a node that does
not answer is its own row and the command exits 3 after printing everything."""

from __future__ import annotations

import json

from tests.nodes.cluster_helpers import ssh


def test_pod_status_all_nodes_lists_each_nodes_pods_and_an_unreachable_one(cluster):
    rig, c3, h1, h2 = cluster.rig, cluster.c3, cluster.h1, cluster.h2
    # A pod container as `c3 pod up` on h1 labels it (backend/runtime/docker_adapter.py), kept alive by sleep.
    # The test hosts' dockerd runs with --bridge=none, so nothing is published (port None; docker's Ports
    # column is parsed in test_parse_pods_reads_the_published_host_port).
    run = ssh(rig, h1, "docker run -d --name c3-chat --label io.c3.pod=chat --label io.c3.slug=vllm/qwen3-8b "
                       "--label io.c3.estate=/home/me/.config/c3/estate.yml "
                       f"--entrypoint sleep {cluster.image_id} 300 && docker create --name c3-idle --label io.c3.pod=idle "
                       f"--label io.c3.slug=vllm/qwen3-32b-tp2 --entrypoint true {cluster.image_id}")
    assert run.returncode == 0, run.stderr
    c3.ok("node", "add", "down", "--host", f"http://{h2.address}:8000", "--ssh", f"root@{h2.address}:2222", "--ssh-key", str(rig.client_key))
    local = {"C3_RIG": "demo"}  # this machine's own pods come from the simulated rig: none planned

    result = c3("pod", "status", "--all-nodes", "--json", env=local)
    assert result.returncode == 3, (result.returncode, result.stderr)
    payload = json.loads(result.stdout)
    assert payload["pods"] == []
    nodes = {n["node"]: n for n in payload["nodes"]}
    assert set(nodes) == {h1.name, h2.name, "down"}
    assert [(p["name"], p["slug"], p["state"], p["port"], p["estate"]) for p in nodes[h1.name]["pods"]] == [
        ("chat", "vllm/qwen3-8b", "running", None, "/home/me/.config/c3/estate.yml"), ("idle", "vllm/qwen3-32b-tp2", "created", None, "")]
    assert nodes[h2.name] == {"node": h2.name, "reachable": True, "error": None, "pods": [], "cut": False}
    assert nodes["down"]["reachable"] is False and "unreachable" in nodes["down"]["error"]

    text = c3("pod", "status", "--all-nodes", env=local)
    assert text.returncode == 3 and "Traceback" not in text.stderr
    lines = text.stdout.splitlines()
    assert f"node {h1.name}: 2 pod(s)" in lines and f"node {h2.name}: 0 pod(s)" in lines
    assert any(line.split()[:4] == [f"{h1.name}/chat", "vllm/qwen3-8b", "no", "port"] and "running (Up" in line for line in lines)
    assert any(line.startswith("node down: unreachable: ") for line in lines)
    assert text.stderr.splitlines()[0] == "c3: error: 1 of 3 node(s) unreachable: down"
    plain = c3("pod", "status", env=local)
    assert plain.returncode == 0 and "node " not in plain.stdout  # without --all-nodes: this machine only, as before


def test_parse_pods_reads_the_published_host_port():
    from backend.nodes.pods import parse_pods

    text = ("chat\tvllm/qwen3-8b\trunning\tUp 5 minutes\t0.0.0.0:18080->8000/tcp, [::]:18080->8000/tcp\t/e.yml\n"
            "\tno-pod-label\trunning\tUp\t\t\n"
            "idle\tvllm/qwen3-32b-tp2\texited\tExited (1) 2 minutes ago\t\t\n")
    pods, cut = parse_pods(text)
    assert [(p.name, p.port, p.state) for p in pods] == [("chat", 18080, "running"), ("idle", None, "exited")] and not cut
