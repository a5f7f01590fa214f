"""Pods of the other registered nodes in the Orchestration view: on the demo's `cluster` world (this machine
registered as `box`, `spark-2` powered off) the unreachable node is one row and never holds up this host's
pods; the rendering of a node's pods, marked by node, from a reading as `c3 pod status --all-nodes` gives it."""

from __future__ import annotations

import pytest

from backend.views.node_pods import NodePods, RemotePod
from c3.screens.node_pods import node_pods_content
from tests.cockpit.conftest import real_app, screen_text, settle, wait_for

SHARED_CLUSTER = pytest.mark.parametrize("shared_world", ["cluster"], indirect=True)
SHARED_PLACED = pytest.mark.parametrize("shared_world", ["placed"], indirect=True)


async def _read(world) -> tuple[list[str], str, bool]:
    """The Orchestration view once the other nodes were read: the facade's calls, the screen's text,
    whether the "Other nodes" part is shown."""
    app, svc = real_app(world)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = pilot.app.screen
        await wait_for(pilot, lambda: getattr(screen, "node_pods", None) is not None, timeout=30, what="the other nodes read")
        await settle(pilot)
        return svc.calls, screen_text(app), screen.query_one("#node-pods").display


@SHARED_CLUSTER
async def test_an_unreachable_node_is_one_row_under_this_hosts_pods(shared_world):
    calls, text, shown = await _read(shared_world)
    assert "node_pods" in calls and shown  # through the facade, in a worker
    assert "Other nodes" in text and "spark-2 ✗ not reachable" in text
    assert "box/" not in text  # this machine's pods are the estate's, listed once, above
    assert "chat" in text  # this host's pods are there all the same


@SHARED_PLACED
async def test_with_no_other_node_the_part_is_not_shown(shared_world):
    calls, text, shown = await _read(shared_world)
    assert "node_pods" in calls and not shown and "Other nodes" not in text


def test_each_pod_row_is_marked_by_its_node_and_hostile_labels_are_shown_not_obeyed():
    readings = [
        NodePods(node="h1", reachable=True, error=None, cut=False, pods=[
            RemotePod(name="chat", slug="vllm/qwen3-8b", state="running", status="Up 5 minutes", port=18080, estate="/e.yml"),
            RemotePod(name="idle\x1b]0;owned\x07", slug="vllm/qwen3-32b-tp2", state="created", status="Created", port=None, estate=""),
        ]),
        NodePods(node="h2", reachable=True, error="docker not found on the node", cut=False, pods=[]),
        NodePods(node="h3", reachable=True, error=None, cut=False, pods=[]),
    ]
    content = node_pods_content(readings, None)
    assert content is not None
    lines = content.plain.splitlines()
    assert lines[0] == "Other nodes"
    assert lines[1] == " h1/chat ● vllm/qwen3-8b :18080 running"
    assert lines[2].startswith(" h1/idle\\x1b]0;owned\\x07") and "\x1b" not in content.plain and lines[2].endswith("— created")
    assert lines[3] == " h2 ✗ docker not found on the node" and lines[4] == " h3 no c3 pods"
    many = [NodePods(node="big", reachable=True, error=None, cut=False,
                     pods=[RemotePod(name=f"p{i}", slug="s", state="exited", status="Exited (0)", port=None, estate="") for i in range(20)])]
    shown = node_pods_content(many, None)
    assert shown is not None and shown.plain.splitlines()[-1] == " +13 more · c3 pod status --all-nodes"
    assert node_pods_content([], None) is None and node_pods_content(None, None) is None
