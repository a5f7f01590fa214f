"""Node writes: one set of rules for `c3 node add` and the add-node gate (they were written four times)."""

from __future__ import annotations

import pytest

from backend.actions import NewNode, Problem
from backend.actions.add_node import AddNode
from backend.actions.base import ignore_progress
from backend.actions.remove_node import RemoveNode
from backend.actions.stop_profile import StopProfile
from backend.actions.trust_node import TrustNode
from backend.errors import C3Error, UsageError
from backend.nodes.registry import add_node, load_registry


def test_the_gate_lists_every_reason_the_cli_refuses_the_first_of():
    bad = NewNode("Bad Name", "ftp://x", "nobody")
    problems = AddNode(bad).problems()
    assert len(problems) == 3 and all(p.blocking for p in problems)
    assert "node name" in problems[0].message and "http(s) URL" in problems[1].message and "USER@HOST" in problems[2].message
    with pytest.raises(UsageError) as caught:
        add_node(bad.name, bad.host, bad.ssh)
    assert (caught.value.message, caught.value.hint) == (problems[0].message, problems[0].hint)
    with pytest.raises(UsageError) as url:
        add_node("ok", bad.host, "me@127.0.0.1")
    assert url.value.message == problems[1].message
    assert load_registry().nodes == []


def test_a_url_with_a_password_is_refused_without_showing_it():
    secret = "s3cr3t-pass"
    [problem] = AddNode(NewNode("n", f"http://user:{secret}@10.0.0.5:8000", "me@10.0.0.5")).problems()
    assert secret not in problem.text() and problem.blocking


def test_add_remove_and_trust_a_local_node():
    action = AddNode(NewNode("here", "http://127.0.0.1:9", "me@127.0.0.1", local=True))
    assert action.problems() == [] and "driven without SSH (--local)" in action.plan().lines
    node = action.run(ignore_progress).data
    assert node.local and [n.name for n in load_registry().nodes] == ["here"]
    [taken] = AddNode(NewNode("here", "http://127.0.0.1:9", "me@127.0.0.1")).problems()
    assert taken == Problem("node `here` is already registered", hint="`c3 node rm here` first")
    trust = TrustNode("here")
    assert trust.problems() == [Problem("node here is this machine: no SSH, nothing to trust", "noop")]
    assert trust.run(ignore_progress).message == "node here is this machine: no SSH, nothing to trust"
    remove = RemoveNode("here")
    assert remove.problems() == [] and remove.plan().destructive
    assert remove.run(ignore_progress).ok and load_registry().nodes == []
    assert remove.problems()[0].message == "node `here` is not registered"
    with pytest.raises(C3Error):
        remove.run(ignore_progress)


def test_profile_stop_of_nothing_is_a_problem_and_a_plan_not_a_traceback():
    assert StopProfile(None).problems()[0].message == "no active profile"
    [problem] = StopProfile("nope").problems()
    assert problem.blocking and problem.message.startswith("no profile `nope`")
    assert StopProfile("nope").plan().lines[0].startswith("stop profile nope: no profile `nope`")
