"""What model weights a machine holds on disk: its Hugging Face hub cache (`models--ORG--NAME/…`) and
plain model folders (a folder of safetensors/GGUF files, a GGUF file on its own), with their sizes.

This module is the whole scanner and imports only the standard library, because the same code reads a
remote node: `backend.nodes.cache` sends this file's source to the node's `python3 -` over the node's
shell and reads back the JSON it prints (one scanner, one set of rules, on this machine and on a node).
So it must run on the Python 3.8 a node may have: no `match`, no `removeprefix`, no runtime `X | Y`.

Sizes are the real files' sizes (`st_size`): a snapshot's symlinks into `blobs/` point at files that
are counted once (by device and inode, also across hard links and overlapping roots). The walk never
follows a symlinked folder, so a symlink loop cannot make it go round; a symlink that loops or dangles
is counted as broken. Every scan is bounded: entries looked at, folder depth, models per root, and a
deadline — a cache of millions of files or a slow disk ends with what was found and says it was cut.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from typing import Any

HF_HUB = "@hf-hub"
"""Root spec for this machine's Hugging Face hub cache: `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else
`~/.cache/huggingface/hub` (huggingface_hub's own order), resolved where the scan runs."""
MODEL_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt", ".pth")
"""Files that make a folder a model folder (outside the HF hub layout, where every repo is one)."""
LIMITS = {"max_entries": 200000, "max_depth": 10, "max_models": 500, "deadline_s": 20.0, "max_revisions": 20}
"""Default bounds: directory entries looked at in all, folder depth below a model, models per root,
seconds, snapshot revisions listed per model."""


class _Budget:
    """The scan's shared bounds; `cut` says which one ended it first."""

    def __init__(self, limits: dict[str, Any]) -> None:
        self.entries_left = int(limits["max_entries"])
        self.max_depth = int(limits["max_depth"])
        self.max_models = int(limits["max_models"])
        self.max_revisions = int(limits["max_revisions"])
        self.deadline = time.monotonic() + float(limits["deadline_s"])
        self.cut: str | None = None
        self.seen: set[tuple[int, int]] = set()
        """(device, inode) of every file counted anywhere in this scan."""

    def take(self) -> bool:
        """Spend one entry; False (and `cut` set) once a bound is reached."""
        if self.cut is not None:
            return False
        if self.entries_left <= 0:
            self.cut = "entries"
            return False
        if time.monotonic() > self.deadline:
            self.cut = "time"
            return False
        self.entries_left -= 1
        return True


def _entries(path: str, budget: _Budget) -> list[os.DirEntry]:  # type: ignore[type-arg]
    out = []
    try:
        with os.scandir(path) as it:
            for entry in it:
                if not budget.take():
                    break
                out.append(entry)
    except OSError:
        pass
    return sorted(out, key=lambda e: e.name)


def _file_size(entry: os.DirEntry, budget: _Budget, model_seen: set[tuple[int, int]]) -> tuple[int, int, bool]:  # type: ignore[type-arg]
    """(bytes counted for the model, bytes new to the whole scan, broken link). A symlink counts its
    target once; a loop or a dangling link raises OSError on stat and is broken."""
    try:
        st = os.stat(entry.path) if entry.is_symlink() else entry.stat(follow_symlinks=False)
    except OSError:
        return 0, 0, entry.is_symlink()
    if not stat.S_ISREG(st.st_mode):
        return 0, 0, False
    key = (st.st_dev, st.st_ino)
    mine = 0 if key in model_seen else st.st_size
    model_seen.add(key)
    new = 0 if key in budget.seen else st.st_size
    budget.seen.add(key)
    return mine, new, False


def _walk(path: str, budget: _Budget, depth: int = 0) -> dict[str, Any]:
    """Sizes under one model's folder (never following a symlinked folder)."""
    acc = {"bytes": 0, "new_bytes": 0, "files": 0, "incomplete_bytes": 0, "broken_links": 0, "partial": False}
    model_seen: set[tuple[int, int]] = set()
    stack = [(path, depth)]
    while stack:
        folder, level = stack.pop()
        if level > budget.max_depth:
            acc["partial"] = True
            continue
        for entry in _entries(folder, budget):
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                stack.append((entry.path, level + 1))
                continue
            mine, new, broken = _file_size(entry, budget, model_seen)
            acc["broken_links"] += int(broken)
            if mine or new:
                acc["files"] += 1
            acc["bytes"] += mine
            acc["new_bytes"] += new
            if entry.name.endswith(".incomplete"):
                acc["incomplete_bytes"] += mine
        if budget.cut is not None:
            acc["partial"] = True
            break
    return acc


def _small_text(path: str, limit: int = 200) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace").strip()
    except OSError:
        return None


def _hf_model(entry: os.DirEntry, budget: _Budget) -> dict[str, Any]:  # type: ignore[type-arg]
    """One `models--ORG--NAME` folder: the repo id, its sizes, its snapshot revisions and refs."""
    name = "/".join(entry.name[len("models--"):].split("--"))
    model: dict[str, Any] = {"name": name, "kind": "hf", "path": entry.path}
    model.update(_walk(entry.path, budget, 0))
    snapshots = os.path.join(entry.path, "snapshots")
    model["revisions"] = [e.name for e in _entries(snapshots, budget) if e.is_dir(follow_symlinks=False)][: budget.max_revisions]
    refs = {}
    for ref in _entries(os.path.join(entry.path, "refs"), budget)[: budget.max_revisions]:
        if ref.is_file(follow_symlinks=False):
            refs[ref.name] = (_small_text(ref.path) or "")[:64]
    model["refs"] = refs
    return model


def _holds_weights(path: str, budget: _Budget) -> bool:
    """A folder is a model folder when it (or a folder two levels down at most) holds weight files."""
    stack = [(path, 0)]
    while stack:
        folder, level = stack.pop()
        for entry in _entries(folder, budget):
            if entry.name.endswith(MODEL_SUFFIXES):
                return True
            if level < 2 and entry.is_dir(follow_symlinks=False):
                stack.append((entry.path, level + 1))
    return False


def hub_path(environ: dict[str, str] | None = None) -> str:
    """Where huggingface_hub keeps its cache on this machine."""
    env = os.environ if environ is None else environ
    if env.get("HF_HUB_CACHE"):
        return os.path.expanduser(env["HF_HUB_CACHE"])
    home = env.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return os.path.join(os.path.expanduser(home), "hub")


def _scan_root(spec: str, budget: _Budget) -> dict[str, Any]:
    path = hub_path() if spec == HF_HUB else os.path.expanduser(os.path.expandvars(spec))
    root: dict[str, Any] = {"given": spec, "path": path, "exists": False, "error": None, "models": []}
    try:
        st = os.stat(path)
    except OSError as exc:
        # ENOENT is simply "nothing cached here"; a loop, a permission problem are said.
        root["error"] = None if isinstance(exc, FileNotFoundError) else (exc.strerror or type(exc).__name__)
        return root
    if not stat.S_ISDIR(st.st_mode):
        root["error"] = "not a folder"
        return root
    root["exists"] = True
    hub = os.path.join(path, "hub")
    if spec != HF_HUB and os.path.isdir(hub) and not os.path.islink(hub):
        path = root["path"] = hub  # an HF_HOME-like folder (what pods and recipes mount): its hub
    for entry in _entries(path, budget):
        if len(root["models"]) >= budget.max_models:
            budget.cut = budget.cut or "models"
            break
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_dir and entry.name.startswith("models--"):
            root["models"].append(_hf_model(entry, budget))
        elif is_dir and not entry.name.startswith((".", "datasets--", "spaces--")) and _holds_weights(entry.path, budget):
            model = {"name": entry.name, "kind": "folder", "path": entry.path, "revisions": [], "refs": {}}
            model.update(_walk(entry.path, budget, 0))
            root["models"].append(model)
        elif not is_dir and entry.name.endswith(MODEL_SUFFIXES):
            mine, new, broken = _file_size(entry, budget, set())
            if mine or broken:
                root["models"].append({"name": entry.name, "kind": "file", "path": entry.path, "bytes": mine, "new_bytes": new, "files": 1,
                                       "incomplete_bytes": 0, "broken_links": int(broken), "partial": False, "revisions": [], "refs": {}})
        if budget.cut is not None:
            break
    return root


def scan(roots: list[str], limits: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every root's models and sizes, bounded; roots that resolve to the same folder are read once."""
    budget = _Budget(dict(LIMITS, **(limits or {})))
    started = time.monotonic()
    out: dict[str, Any] = {"roots": [], "total_bytes": 0, "cut": None}
    done: set[str] = set()
    for spec in roots:
        root = _scan_root(spec, budget)
        real = os.path.realpath(root["path"])
        # An absent `~/.cache/huggingface` (a recipe's mount) is the absent hub cache said twice.
        if real in done or (not root["exists"] and os.path.join(real, "hub") in done):
            continue
        done.add(real)
        out["roots"].append(root)
        out["total_bytes"] += sum(m.get("new_bytes", 0) for m in root["models"])
        if budget.cut is not None:
            break
    out["cut"] = budget.cut
    out["elapsed_s"] = round(time.monotonic() - started, 3)
    return out


def main(argv: list[str]) -> int:
    """`python3 - '{"roots": [...], "limits": {...}}'`: print the scan as one JSON line."""
    request = json.loads(argv[1]) if len(argv) > 1 else {}
    sys.stdout.write(json.dumps(scan(list(request.get("roots") or [HF_HUB]), request.get("limits"))) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
