"""Helper for test_runner_local: run a two-node mp plan whose nodes are both this machine.

    python -m tests.shard._local_runner VLLM_PATH MASTER_PORT [FIRST_TOKEN_DEADLINE_S]

The head's API port is MASTER_PORT + 1.
"""

from __future__ import annotations

import asyncio
import os
import sys

from backend.errors import C3Error
from backend.remote.local import LocalShell
from backend.remote.node import Node
from backend.shard.models import Interface, NodeFacts, Route
from backend.shard.ops import collect_secrets
from backend.shard.plan import ShardOptions, build_plan
from backend.shard.runner import ShardRunner, Timing


def main() -> int:
    vllm, port = sys.argv[1], int(sys.argv[2])
    nodes = [Node(name="a", host="http://127.0.0.1:8000", ssh="u@127.0.0.1"), Node(name="b", host="http://127.0.0.2:8000", ssh="u@127.0.0.2")]
    facts = {
        "a": NodeFacts(node="a", local=True, interfaces=[Interface(name="eth9", address="127.0.0.1", prefix=24)]),
        "b": NodeFacts(node="b", local=True, interfaces=[Interface(name="eth9", address="127.0.0.2", prefix=24)]),
    }
    options = ShardOptions(backend="mp", model="org/m", vllm=vllm, gpus_per_node=1, master_port=port, api_port=port + 1,
                           stop_services=bool(os.environ.get("FAKE_STOP_SERVICES")), service_name="vllm-single.service")
    plan = build_plan(nodes, facts, {"b": Route(node="b", interface="eth9", source="127.0.0.2")}, options, head_address="127.0.0.1")
    secrets = collect_secrets(options)
    runner = ShardRunner(plan=plan, execs={"a": LocalShell(nodes[0]), "b": LocalShell(nodes[1])}, echo=lambda s: print(s, flush=True),
                         secrets=secrets, timing=Timing(kill_grace_s=5, first_token_s=float(sys.argv[3]) if len(sys.argv) > 3 else 300))
    try:
        return asyncio.run(runner.run())
    except C3Error as error:  # as the CLI shows it (c3.cli.fail)
        for line in getattr(error, "tail", ()):
            print(f"  | {line}", flush=True)
        print(f"c3: error: {error.message}", flush=True)
        if error.hint:
            print(f"hint: {error.hint}", flush=True)
        return error.exit_code


if __name__ == "__main__":
    sys.exit(main())
