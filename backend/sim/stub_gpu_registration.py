"""The stub engine's GPU registration: a file in `$C3_GPU_REGISTRY` per process, which the simulated
GPU view (`probe.py`, the rig's fake NVML) reads as a compute process. See scripts/rig/README.md.

Standard library only, like the rest of the stub engine (see `stub_engine.py`).
"""

from __future__ import annotations

import os
import re
import socket
from typing import Any


def gpu_tokens(env: dict[str, str], world_size: int) -> list[str]:
    """The GPUs this process would land on, as UUIDs or indices ("all" = every GPU)."""
    def split(v: str) -> list[str]:
        return [t.strip() for t in v.split(",") if t.strip()]
    if env.get("C3_STUB_GPUS"):  # simulates a runtime that ignored the mask
        return split(env["C3_STUB_GPUS"])
    nv, cuda = env.get("NVIDIA_VISIBLE_DEVICES"), env.get("CUDA_VISIBLE_DEVICES")
    visible = None if nv is None else ([] if nv.strip() in ("", "void", "none") else split(nv))
    if cuda is not None:
        chosen = split(cuda)
        if visible is None or visible == ["all"]:
            visible = chosen
        else:  # CUDA_VISIBLE_DEVICES indexes into what the container was given
            visible = [visible[int(t)] if t.isdigit() and int(t) < len(visible) else t for t in chosen]
    return visible if visible is not None else [str(i) for i in range(world_size)]


def container_id() -> str | None:
    """This process's container id when inside Docker (from mountinfo, else cgroup), else None."""
    if not os.path.exists("/.dockerenv"):
        return None
    for source, pattern in (("/proc/self/mountinfo", r"/containers/([0-9a-f]{64})/"),
                            ("/proc/self/cgroup", r"([0-9a-f]{64})")):
        try:
            with open(source) as fh:
                found = re.search(pattern, fh.read())
        except OSError:
            continue
        if found:
            return found.group(1)
    return socket.gethostname()


class Registration:
    """One file in `$C3_GPU_REGISTRY` saying which GPUs this process holds and how much memory."""

    def __init__(self, cfg: dict[str, Any], env: dict[str, str]):
        self.path: str | None = None
        directory = env.get("C3_GPU_REGISTRY")
        if not directory:
            return
        cid, pid = container_id(), os.getpid()
        self.cfg, self.env = cfg, env
        try:
            pidns = os.readlink("/proc/self/ns/pid")  # a reader in the same namespace can trust `pid`
        except OSError:
            pidns = "unknown"
        self.head = ["# c3 gpu registration v1", f"pid {pid}", f"pidns {pidns}", f"name {cfg['name']}",
                     f"port {cfg['port']}", f"hostname {socket.gethostname()}"] + ([f"container {cid}"] if cid else [])
        self.write(os.path.join(directory, f"{(cid or 'host')[:12]}-{pid}.gpu"), asleep=False)

    def write(self, path: str, asleep: bool) -> None:
        """(Re)write the file: awake it holds `C3_STUB_MEM_MIB` (or its utilization share), asleep at level 1 only
        `C3_STUB_SLEEP_MIB` (default 1024: the CUDA context and workspaces a sleeping vLLM keeps)."""
        mib = int(self.env.get("C3_STUB_SLEEP_MIB", "1024") or 0) if asleep else int(self.env.get("C3_STUB_MEM_MIB", "0") or 0)
        lines = self.head + [f"gpu {t} {mib} {0 if mib or asleep else self.cfg['util']:.4f}"
                             for t in gpu_tokens(self.env, self.cfg["tp"] * self.cfg["pp"])]
        directory = os.path.dirname(path)
        try:
            os.makedirs(directory, exist_ok=True)
            with open(path + ".tmp", "w") as fh:
                fh.write("\n".join(lines) + "\n")
            os.replace(path + ".tmp", path)
            self.path = path
        except OSError as exc:  # the engine still boots; only the simulated GPU view misses it
            print(f"WARNING: cannot write GPU registration {path}: {exc}", flush=True)

    def sleep(self, asleep: bool) -> None:
        """Sleep mode (`--enable-sleep-mode`) level 1 frees the weights and KV on the GPU; waking takes them back."""
        if self.path:
            self.write(self.path, asleep)

    def remove(self) -> None:
        if self.path:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            self.path = None
