"""The record a foreground `c3 shard start` keeps for the cockpit: `$C3_STATE/shard/shard-<tag>.json`.

`shard stop` and `shard status` need no state file (each process carries C3_SHARD); given a shard's tag
and no `--nodes`, they read its nodes here. The cockpit has no `--nodes` to ask: it learns from this record which nodes a running shard spans, in rank order,
and how the runner reaches them. The runner writes it when it starts, marks it `serving` after the
first token, and `ended` with the reason when it stops (a rank that died names itself there), so the
cockpit can still say why a shard stopped after its parts are gone. A record whose runner process is
gone without saying so is read as ended; ended records are dropped after `KEEP_ENDED_S`.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from backend import paths
from backend.atomic import write_atomic
from backend.errors import C3Error
from backend.remote.node import Node
from backend.shard.models import Backend
from backend.stub_registry import pid_alive
from backend.userfiles import read_json

KEEP_ENDED_S = 3600.0
"""How long the cockpit keeps showing a shard that ended (with why), before its record is removed."""
_TAG = re.compile(r"^[A-Za-z0-9._-]{1,200}$")

ShardState = Literal["starting", "serving", "ended"]


class ShardRecord(BaseModel):
    """One shard started on this machine, as its runner last wrote it."""

    tag: str
    """The shard's C3_SHARD value (`HEAD-PORT`)."""
    backend: Backend
    """`ray`, `mp` or `rpc`."""
    model: str
    """What the server serves."""
    api_url: str
    """The head's OpenAI base URL."""
    head_port: int
    """The plan's head port (the first worker's RPC port for rpc: it names the parts)."""
    pid: int
    """The foreground `c3 shard start` process."""
    nodes: list[Node]
    """The nodes in rank order, as the runner reaches them (a node it drives without SSH is marked local)."""
    state: ShardState = "starting"
    """`starting` until the first token, `serving`, then `ended`."""
    reason: str | None = None
    """Why it ended (the runner's last word: a part that died, a stop by request, a signal)."""
    failed_node: str | None = None
    """The node the failure that ended it names (a rank that died there), if any."""
    started_at: float = 0.0
    """Unix time the runner started."""
    ended_at: float | None = None
    """Unix time it ended."""
    runner_gone: bool = False
    """Set on reading, never written: the runner died without saying why, so its parts may still run."""


def shard_dir() -> Path:
    """`$C3_STATE/shard`."""
    return paths.state_home() / "shard"


def record_file(tag: str) -> Path:
    if not _TAG.match(tag):
        raise ValueError(f"shard tag {tag!r} is not a plain name")
    return shard_dir() / f"shard-{tag}.json"


def write(record: ShardRecord) -> None:
    """Write (or replace) the record, mode 0600: it names the nodes' SSH targets and key paths."""
    write_atomic(record_file(record.tag), record.model_dump_json(indent=2) + "\n", mode=0o600)


def read_records(*, now: float | None = None) -> list[ShardRecord]:
    """Every shard record, newest first; a running one whose runner is gone is read as ended, and an
    ended one older than KEEP_ENDED_S is removed. A file c3 cannot read is skipped."""
    directory = shard_dir()
    if not directory.is_dir():
        return []
    now = time.time() if now is None else now
    found: list[ShardRecord] = []
    for path in sorted(directory.glob("shard-*.json")):
        try:
            record = ShardRecord.model_validate(read_json(path, what="shard record"))
        except (C3Error, ValidationError, ValueError):
            continue
        if record.state != "ended" and (record.pid <= 1 or not pid_alive(record.pid)):
            record = record.model_copy(update={"state": "ended", "reason": "the `c3 shard start` process is gone (killed?)",
                                               "ended_at": record.ended_at or now, "runner_gone": True})
        if record.state == "ended" and now - (record.ended_at or now) > KEEP_ENDED_S:
            try:
                path.unlink()
            except OSError:
                pass
            continue
        found.append(record)
    return sorted(found, key=lambda r: -r.started_at)



def find(tag: str) -> ShardRecord | None:
    """The record of shard `tag`, when its `c3 shard start` ran on this machine (an ended one for KEEP_ENDED_S)."""
    return next((r for r in read_records() if r.tag == tag), None)
