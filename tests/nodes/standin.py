"""A stand-in `docker` for launch tests on a local node: it records every call's argv (one JSON list
a line) and answers the few questions a launch asks (version, image inspect, run, rm, inspect)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

SCRIPT = """#!/bin/sh
python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@" >> {log}
case "$1" in
  version) echo 28.0.0;;
  image) echo sha256:{zeros};;
  run) echo 0123456789ab;;
  inspect) echo "running 0 2026-01-01T00:00:00Z";;
  container) exit 1;;
esac
exit 0
"""


@dataclass
class StandIn:
    tmp: Path
    log: Path
    env: dict[str, str]

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]


def standin_docker(tmp: Path) -> StandIn:
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    log = tmp / "docker.log"
    (bindir / "docker").write_text(SCRIPT.format(log=log, zeros="0" * 64))
    (bindir / "docker").chmod(0o755)
    return StandIn(tmp, log, {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"})
