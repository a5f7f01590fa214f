"""Reading and writing the estate file (schema_version 1), club-3090 files included.

Parsing is strict about structure (a typo such as `gpu:` or `estates:` is reported, not ignored)
and lenient about what club-3090 writes: `compose:`/`compose_name:` mean `slug:`, and its
`rig`/`created`/`updated` keys are kept as they are.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import Any, TypeGuard

import yaml

from backend import limits, strict_yaml
from backend.atomic import write_atomic
from backend.errors import UsageError
from backend.estate.roundtrip import dump_preserving
from backend.models.estate import POD_NAME_PATTERN, Estate, Pod, Problem
from backend.text import show
from backend.userfiles import link_loop, read_text

SUPPORTED_SCHEMAS = (1,)
MAX_SLUG = 200
"""Longer is no catalog slug; the cap keeps every message that names a slug one readable line."""
MAX_PROBLEMS = 100
MAX_NODES = 1_200_000
"""YAML values per estate file: ~120,000 pods (10 values each), listed within seconds and ~200 MB."""
"""Longer is no catalog slug; the cap keeps every message that names a slug one readable line."""
TOLERATED_TOP_KEYS = ("rig", "created", "updated")
_TOP_KEYS = {"schema_version", "estate", *TOLERATED_TOP_KEYS}
_SLUG_KEYS = ("slug", "compose", "compose_name")
_POD_KEYS = {"name", "gpus", "port", "uuids", "on_demand", "sleep_mode", *_SLUG_KEYS}
_NAME_RE = re.compile(POD_NAME_PATTERN)
NAME_RULE = "lower-case letters, digits and '-', starting with a letter or digit, at most 63 characters"


def valid_pod_name(name: str) -> bool:
    """`[a-z0-9][a-z0-9-]*`, at most 63 characters (the container is `c3-<name>`)."""
    return isinstance(name, str) and len(name) <= 63 and _NAME_RE.fullmatch(name) is not None


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _show(value: Any) -> str:
    return show(value, 40)


def parse_document(data: Any, source: str) -> tuple[Estate, list[Problem]]:
    """Turn a loaded YAML document into an Estate plus every schema problem found.

    When problems are returned the Estate holds only the entries that parsed, so callers that
    want everything reported (validation of a hand-written file) still get the rest checked.
    """
    problems: list[Problem] = []

    def bad(message: str, pod: str | None = None, code: str = "schema") -> None:
        problems.append(Problem(code=code, message=message, pod=pod, pods=(pod,) if pod else ()))

    if data is None:
        return Estate(), problems  # an empty file is an empty estate
    if not isinstance(data, dict):
        bad(f"estate file {source} must be a mapping with `schema_version: 1` and an `estate:` list")
        return Estate(), problems
    for key in data:
        if key not in _TOP_KEYS:
            bad(f"estate file {source}: unknown key `{_show(key)}` (expected schema_version, estate)")
    version = data.get("schema_version", 1)
    if not _is_int(version) or version not in SUPPORTED_SCHEMAS:
        bad(f"unsupported estate schema_version={_show(version)}; supported={list(SUPPORTED_SCHEMAS)}")
        return Estate(), problems
    entries = data.get("estate", [])
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        bad(f"estate file {source} must contain an `estate:` list")
        return Estate(), problems

    pods: list[Pod] = []
    seen: dict[str, int] = {}
    for number, entry in enumerate(entries, start=1):
        if len(problems) >= MAX_PROBLEMS:
            # A file broken everywhere (a million bad entries) is reported by its first problems;
            # collecting them all cost seconds and gigabytes.
            problems.append(Problem(code="schema", message=f"estate file {source}: stopped after {MAX_PROBLEMS} problems (entries #{number}–#{len(entries)} not checked)"))
            break
        where = f"estate entry #{number}"
        if not isinstance(entry, dict):
            bad(f"{where} must be a mapping with name, slug, gpus and port")
            continue
        name = entry.get("name")
        if name is None:
            bad(f"{where} has no name")
            continue
        if not isinstance(name, str) or not valid_pod_name(name):
            bad(f"{where}: pod name `{_show(name)}` is not valid: use {NAME_RULE}", code="name")
            if not isinstance(name, str):
                continue
        label = f"pod `{name}` ({where})"
        folded = name.casefold()
        if folded in seen:
            bad(f"duplicate pod name `{name}`: {where} and estate entry #{seen[folded]} (names are unique ignoring case)", pod=name, code="name")
        else:
            seen[folded] = number
        ok = valid_pod_name(name)
        for key in entry:
            if key not in _POD_KEYS:
                bad(f"{label}: unknown key `{_show(key)}` (expected name, slug, gpus, port, on_demand, sleep_mode)", pod=name)
                ok = False
        slugs = [entry[k] for k in _SLUG_KEYS if k in entry]
        slug = slugs[0] if slugs else None
        if slug is None:
            bad(f"{label} has no slug (club-3090 files say `compose:`; both are accepted)", pod=name)
            ok = False
        elif not isinstance(slug, str) or not slug.strip() or len(slug) > MAX_SLUG:
            bad(f"{label}: slug must be text such as vllm/qwen3-8b (at most {MAX_SLUG} characters), not `{_show(slug)}`", pod=name)
            ok = False
        elif len({s for s in slugs if isinstance(s, str)}) > 1:
            bad(f"{label} names two different slugs ({', '.join(str(s) for s in slugs)})", pod=name)
            ok = False
        gpus = entry.get("gpus")
        if not isinstance(gpus, list) or not gpus:
            bad(f"{label} must set gpus: [..] (a non-empty list of host GPU indices)", pod=name)
            ok = False
        elif not all(_is_int(g) for g in gpus):
            bad(f"{label} has a non-integer GPU index in {_show(gpus)}", pod=name)
            ok = False
        elif any(g < 0 for g in gpus):
            bad(f"{label} has a negative GPU index in {_show(gpus)}", pod=name)
            ok = False
        elif len(gpus) > 64 or any(g >= 4096 for g in gpus):
            bad(f"{label} lists more than 64 GPUs or an index past 4095 in {_show(gpus)}", pod=name)
            ok = False
        elif len(set(gpus)) != len(gpus):
            dup = next(g for g in gpus if gpus.count(g) > 1)
            bad(f"{label} lists GPU {dup} twice", pod=name)
            ok = False
        port = entry.get("port")
        if not limits.is_port(port):
            bad(f"{label} must set an integer port between 1 and 65535, not `{_show(port)}`", pod=name)
            ok = False
        uuids = entry.get("uuids")
        if uuids is not None and (
            not isinstance(uuids, list)
            or not all(isinstance(u, str) for u in uuids)
            or (isinstance(gpus, list) and len(uuids) != len(gpus))
        ):
            bad(f"{label}: uuids must be a list of GPU UUIDs, one per GPU index", pod=name)
            ok = False
        on_demand = entry.get("on_demand", False)
        if not isinstance(on_demand, bool):
            bad(f"{label}: on_demand must be true or false, not `{_show(on_demand)}`", pod=name)
            ok = False
        sleep_mode = entry.get("sleep_mode", False)
        if not isinstance(sleep_mode, bool):
            bad(f"{label}: sleep_mode must be true or false, not `{_show(sleep_mode)}`", pod=name)
            ok = False
        if ok and isinstance(slug, str) and isinstance(gpus, list) and _is_int(port):  # `ok` implies these; the checks tell mypy
            pods.append(
                Pod(name=name, slug=slug.strip(), gpus=tuple(gpus), port=port, uuids=tuple(uuids) if uuids is not None else None,
                    on_demand=on_demand is True, sleep_mode=sleep_mode is True)
            )
    extra = {k: data[k] for k in TOLERATED_TOP_KEYS if k in data}
    return Estate(schema_version=version, pods=pods, extra=extra), problems


def estate_exists(path: Path) -> bool:
    """Whether the estate file exists; a path the OS rejects (too long, a file in the way) does not.

    A symlink loop is said as such (exit 3, as reading it is), not as "no estate file": `Path.exists`
    answers False for ELOOP, and the operator would then look for a file that is there."""
    try:
        os.stat(path)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise link_loop(path, "estate file") from None
        return False
    return True


def read_document(path: Path) -> Any:
    """The YAML document in `path` (None for a missing or empty file).

    A regular file of bounded size only; aliases, duplicate keys and unknown tags are refused with
    their line (backend.strict_yaml) — a usage error (exit 2), as is every malformed file.
    """
    text = read_text(path, what="estate file", missing_ok=True)
    if text is None:
        return None
    return strict_yaml.load(text, source=str(path), what="estate file", max_nodes=MAX_NODES)


def load_estate(path: Path) -> Estate:
    """Load and structurally check an estate file. A missing file is an empty estate.

    Any schema problem is a UsageError (exit 2) naming the file and the entry; for the full list
    use `parse_document` (what `c3 pod validate`-style callers and the cockpit show).
    """
    path = Path(path)
    estate, problems = parse_document(read_document(path), str(path))
    if problems:
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise UsageError(problems[0].message + more, hint=f"fix {path} by hand; c3 wrote nothing")
    return estate


def dump_estate(estate: Estate) -> str:
    """The YAML text c3 writes: schema_version, kept extra keys, then one block per pod."""
    head: dict[str, Any] = {"schema_version": estate.schema_version}
    head.update(estate.extra)
    text = yaml.safe_dump(head, sort_keys=False, default_flow_style=False, allow_unicode=True)
    if not estate.pods:
        return text + "estate: []\n"
    items: list[dict[str, Any]] = []
    for pod in estate.pods:
        item: dict[str, Any] = {"name": pod.name, "slug": pod.slug, "gpus": list(pod.gpus), "port": pod.port}
        if pod.uuids is not None:
            item["uuids"] = list(pod.uuids)
        if pod.on_demand:
            item["on_demand"] = True
        if pod.sleep_mode:
            item["sleep_mode"] = True
        items.append(item)
    body = yaml.safe_dump({"estate": items}, sort_keys=False, default_flow_style=None, allow_unicode=True, width=200)
    return text + body


def save_estate(path: Path, estate: Estate) -> None:
    """Write atomically, keeping the file's comments, key order and `compose:` spelling
    (backend.estate.roundtrip). Callers doing a read-modify-write hold `backend.atomic.locked(path)`."""
    old = read_text(path, what="estate file", missing_ok=True) or ""
    text = dump_preserving(old, estate) if old else None
    write_atomic(Path(path), text if text is not None else dump_estate(estate))
