"""Every engine command line c3 renders, by name: catalog slugs, recipes (each rank) and shard launches.

The real-engine tests hand these to the engines' own argument parsers, so a flag that drifted fails a
test that names where it came from.
"""

from __future__ import annotations

from backend.catalog import load_catalog
from backend.cluster.plan import render as render_recipe
from backend.recipes import load_recipes
from backend.remote.node import Node
from backend.runtime.engines import render
from backend.shard import mp_cmds, ray_cmds

_NODES = [Node(name="n0", host="http://10.213.9.2:8000", ssh="root@10.213.9.2"),
          Node(name="n1", host="http://10.213.9.3:8000", ssh="root@10.213.9.3")]


def slug_commands(engine: str) -> dict[str, list[str]]:
    """slug → rendered argv, for every built-in catalog entry of `engine`."""
    return {entry.slug: render(entry).argv for entry in load_catalog().entries if entry.engine == engine}


def recipe_commands(engine: str = "vllm") -> dict[str, list[str]]:
    """`recipe:<id>:rank<r>` → the engine argv each rank runs (after the image in `docker run`)."""
    found: dict[str, list[str]] = {}
    for recipe in load_recipes().values():
        if recipe.engine != engine:
            continue
        plan = render_recipe(recipe, _NODES[: recipe.nodes], allow_unpinned=True)
        for rank in plan.ranks:
            argv = rank.run_argv
            engine_argv = argv[argv.index(plan.image) + 1:]
            if engine == "vllm" and engine_argv[:1] != ["vllm"]:
                # Arguments to the image's own entrypoint: vllm/vllm-openai images run `vllm serve` there.
                engine_argv = ["vllm", "serve", *engine_argv]
            found[f"recipe:{recipe.id}:rank{rank.rank}"] = engine_argv
    return found


def shard_commands() -> dict[str, list[str]]:
    """The `vllm serve` lines `c3 shard start` renders (multiprocessing ranks and the Ray executor)."""
    common = dict(model="Qwen/Qwen3-8B", tp=1, pp=2, api_port=8000, args=["--max-model-len", "4096"])
    return {
        "shard:mp:rank0": mp_cmds.serve("vllm", nnodes=2, rank=0, master="10.213.9.2", master_port=29501, **common).argv,
        "shard:mp:rank1": mp_cmds.serve("vllm", nnodes=2, rank=1, master="10.213.9.2", master_port=29501, **common).argv,
        "shard:ray": ray_cmds.serve("vllm", head="10.213.9.2", ray_port=6380, **common).argv,
    }


def vllm_commands() -> dict[str, list[str]]:
    return {**slug_commands("vllm"), **recipe_commands("vllm"), **shard_commands()}
