"""Nothing that reaches a node's shell executes: hostile env keys are refused, hostile values, image
names, model ids and args arrive as literal words. Each script runs for real under /bin/sh."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from backend.errors import UsageError
from backend.remote.local import LocalShell
from backend.remote.node import Node
from backend.shard.models import Step
from backend.shard.plan import render_step
from backend.shard.profile import ShardProfile
from backend.shard.scripts import launch_script, secrets_stdin


def _hostile(marker: Path) -> list[str]:
    m = str(marker)
    return [f"$(touch {m})", f"`touch {m}`", f"x; touch {m}", f"'; touch {m}; '", f"\"$(touch {m})\"",
            f"a\nb; touch {m}", f"--x=$(touch {m})", f"~/$(touch {m})"]


@pytest.mark.parametrize("key", ["NCCL_X$(touch PWNED)", "A;B", "1ABC", "A B", "A=B", "", "A-B", "A\nB"])
def test_hostile_env_keys_are_refused_everywhere(key, tmp_path):
    step = Step(label="x", argv=["true"])
    with pytest.raises(UsageError, match="not a valid variable name"):
        launch_script({key: "1"}, step, tag="t", secret_names=[])
    with pytest.raises(UsageError, match="not a valid variable name"):
        render_step({key: "1"}, step, [])
    with pytest.raises(UsageError, match="not a valid variable name"):
        secrets_stdin({key: "1"})
    with pytest.raises(ValidationError):
        ShardProfile(model="m", env={key: "1"})


def test_hostile_values_model_and_args_never_execute(tmp_path):
    marker = tmp_path / "PWNED"
    words = _hostile(marker)
    env = {f"V{i}": w for i, w in enumerate(words)}
    step = Step(label="x", argv=["printf", "%s\\n", *words], env={"STEP_V": words[0]})
    script = launch_script(env, step, tag=f"t-$(touch {marker})", secret_names=[])
    result = asyncio.run(LocalShell(Node(name="here", host="http://127.0.0.1:8000", ssh="u@127.0.0.1")).run(script + "", timeout=10))
    assert result.exit_status == 0, result.stderr
    assert not marker.exists()
    assert result.stdout.splitlines()[-len(words) - 1:] == [line for w in words for line in w.split("\n")][-len(words) - 1:]
    # The dry-run line is a shell line too: running it must not execute anything either.
    line = render_step(env, step, [])
    subprocess.run(["/bin/sh", "-c", line], check=True, capture_output=True, timeout=10)
    assert not marker.exists()


def test_recipe_docker_command_keeps_hostile_words_literal(tmp_path, monkeypatch):
    """The recipe's `docker run` line, run by a shell with a stand-in `docker` that prints its argv."""
    from backend.cluster.plan import render, shell_join
    from backend.recipes import Recipe
    from backend.remote.node import Node
    from tests.nodes.cluster_helpers import stub_recipe

    marker = tmp_path / "PWNED"
    words = _hostile(marker)
    data = stub_recipe("hostile", "sha256:" + "ab" * 32, 8123)
    data["model"] = words[0]
    data["command"] = [*data["command"], *words[1:]]
    data["env"] = {"PLAIN": words[2], "OTHER": words[3]}
    data["public_env"] = ["PLAIN", "OTHER"]
    data["docker"]["volumes"] = [words[7]]
    data["nodes"] = 1
    recipe = Recipe.model_validate(data)
    nodes = [Node(name="n1", host="http://10.213.99.1:8123", ssh="root@10.213.99.1")]
    # A hostile image is refused outright (issue 24: an image is a reference, never an option or shell text).
    with pytest.raises(UsageError, match="not an image reference"):
        render(recipe, nodes, {"image": f"img$(touch {marker})"}, allow_unpinned=True)
    plan = render(recipe, nodes, {"image": "img:latest"}, allow_unpinned=True)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "docker").write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    (bindir / "docker").chmod(0o755)
    line = shell_join(plan.ranks[0].run_argv)
    out = subprocess.run(["/bin/sh", "-c", line], capture_output=True, text=True, timeout=10,
                         env={**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert not marker.exists()
    assert "img:latest" in out.stdout and f"PLAIN={words[2]}" in out.stdout


def test_recipe_with_a_hostile_env_name_does_not_load():
    from backend.recipes import Recipe
    from tests.nodes.cluster_helpers import stub_recipe

    data = stub_recipe("hostile", "sha256:" + "ab" * 32, 8123)
    data["env"] = {"X$(touch PWNED)": "1"}
    with pytest.raises(ValidationError, match="not a valid variable name"):
        Recipe.model_validate(data)
