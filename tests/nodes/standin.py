"""A stand-in `docker` for launch tests on a local node: it records every call's argv (one JSON list
a line) and answers the few questions a launch asks (version, image inspect, run, rm, inspect; `ps`
and the GPU-holders inspect from the files `ps` and `held`, when a test writes them). `nvidia_smi`
puts a stand-in nvidia-smi beside it that lists the GPUs a test gives it."""

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
  ps) cat {tmp}/ps 2>/dev/null;;
  inspect) case "$*" in *DeviceRequests*) cat {tmp}/held 2>/dev/null;; *) echo "running 0 2026-01-01T00:00:00Z";; esac;;
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
    (bindir / "docker").write_text(SCRIPT.format(log=log, zeros="0" * 64, tmp=tmp))
    (bindir / "docker").chmod(0o755)
    return StandIn(tmp, log, {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"})


def nvidia_smi(stand_in: StandIn, rows: list[tuple[str, int | None, str | None]]) -> list[str]:
    """A stand-in `nvidia-smi` listing these GPUs (name, memory.total MiB or None for "[N/A]", compute
    capability or None), as `--query-gpu=index,name,memory.total,memory.used,uuid,compute_cap` prints
    them; returns their UUIDs."""
    uuids = [f"GPU-{i:08d}-0000-0000-0000-000000000000" for i in range(len(rows))]
    lines = [f"{i}, {name}, {total if total is not None else '[N/A]'}, 0, {uuids[i]}, {sm or '[N/A]'}"
             for i, (name, total, sm) in enumerate(rows)]
    (stand_in.tmp / "gpus.csv").write_text("\n".join(lines) + "\n")
    smi = stand_in.tmp / "bin" / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncat {stand_in.tmp / 'gpus.csv'}\n")
    smi.chmod(0o755)
    return uuids


def hold(stand_in: StandIn, pod: str, device_ids: list[str]) -> None:
    """A running c3 pod `pod` that docker says holds these GPUs (a DeviceRequest, as the SDK makes it)."""
    import json as _json

    (stand_in.tmp / "ps").write_text("c0ffee000001\n")
    requests = [{"Driver": "nvidia", "Count": 0, "DeviceIDs": device_ids, "Capabilities": [["gpu"]]}]
    (stand_in.tmp / "held").write_text(f"{pod}|<no value>|{_json.dumps(requests)}|\n")
