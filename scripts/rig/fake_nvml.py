"""Build the fake libnvidia-ml.so.1 (scripts/rig/fake_nvml.c) and write the state files it reads.

    python3 scripts/rig/fake_nvml.py build            # prints the library's directory
    python3 scripts/rig/fake_nvml.py demo STATE_FILE  # writes a 2-GPU state file

The library is compiled with gcc against the real nvml.h from the nvidia-nvml-dev wheel, into
`.rig/fake-nvml/<source hash>/libnvidia-ml.so.1` (rebuilt only when the C source changes). Use it by
putting that directory first on LD_LIBRARY_PATH (subprocesses) or by `preload()` in-process before
pynvml's first nvmlInit (pynvml's CDLL("libnvidia-ml.so.1") then finds the already-loaded soname).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import uuid as uuidlib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path(__file__).with_name("fake_nvml.c")
SONAME = "libnvidia-ml.so.1"
FLAGS = ("nomem", "notemp", "nopower", "noutil", "noecc", "noprocs", "lost", "nolimit", "nofan")


def cache_dir() -> Path:
    """Where built rig artefacts live: $C3_RIG_CACHE, else <repo>/.rig (gitignored)."""
    return Path(os.environ.get("C3_RIG_CACHE") or ROOT / ".rig")


def find_nvml_header() -> Path | None:
    """nvml.h from the nvidia-nvml-dev wheel (nvidia/<cuXX>/include/nvml.h in some sys.path entry)."""
    for entry in sys.path:
        base = Path(entry or ".") / "nvidia"
        if base.is_dir():
            for header in sorted(base.glob("*/include/nvml.h"), reverse=True):
                return header
    return None


def build_problem() -> str | None:
    """Why the library cannot be built here (None when it can)."""
    if shutil.which("gcc") is None:
        return "gcc is not installed"
    if find_nvml_header() is None:
        return "nvml.h not found (pip install nvidia-nvml-dev)"
    return None


def build_library(cache: Path | None = None) -> Path:
    """Compile (once per source+header hash) and return the path of libnvidia-ml.so.1."""
    problem = build_problem()
    if problem:
        raise RuntimeError(f"cannot build the fake NVML: {problem}")
    header = find_nvml_header()
    digest = hashlib.sha256(SOURCE.read_bytes() + header.read_bytes()).hexdigest()[:16]
    target = (cache or cache_dir()) / "fake-nvml" / digest / SONAME
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = Path(tmp) / SONAME
        subprocess.run(["gcc", "-O2", "-Wall", "-shared", "-fPIC", f"-Wl,-soname,{SONAME}",
                        f"-I{header.parent}", "-o", str(out), str(SOURCE), "-lm", "-lpthread"],
                       check=True, capture_output=True, text=True)
        os.replace(out, target)  # atomic: parallel builders agree on the result
    return target


def preload(library: Path) -> ctypes.CDLL:
    """Load the fake library into this process so pynvml's CDLL("libnvidia-ml.so.1") resolves to it."""
    return ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)


def derived_uuid(index: int, name: str) -> str:
    return "GPU-" + str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"c3-rig/{index}/{name}"))


@dataclass
class FakeGpu:
    """One GPU of the fake NVML."""

    name: str = "NVIDIA GeForce RTX 3090"
    total_mib: int = 24576
    sm: str = "8.6"
    uuid: str | None = None
    reserved_mib: int = 0
    used_mib: int = 0
    util: int = 0
    mem_util: int = 0
    temp: int = 40
    power_w: float = 30.0
    limit_w: float = 350.0
    fan: int = 30
    ecc: bool = False
    pci: str | None = None
    flags: tuple[str, ...] = ()

    def line(self, index: int) -> str:
        bad = [f for f in self.flags if f not in FLAGS]
        if bad:
            raise ValueError(f"unknown fake GPU flags {bad}; known: {', '.join(FLAGS)}")
        fields = {"uuid": self.uuid or derived_uuid(index, self.name), "name": f'"{self.name}"',
                  "total_mib": self.total_mib, "reserved_mib": self.reserved_mib, "used_mib": self.used_mib,
                  "sm": self.sm, "util": self.util, "mem_util": self.mem_util, "temp": self.temp,
                  "power_w": self.power_w, "limit_w": self.limit_w, "fan": self.fan, "ecc": int(self.ecc),
                  "pci": self.pci or f"00000000:{index + 1:02X}:00.0", "flags": ",".join(self.flags) or "-"}
        return "gpu " + " ".join(f"{k}={v}" for k, v in fields.items())


@dataclass
class FakeProcess:
    """A process NVML reports on a GPU that c3 did not start (a "stranger")."""

    gpu: str
    """The GPU's UUID, or its index as a string."""
    pid: int
    used_mib: int = 1024
    name: str = "python3"

    def line(self) -> str:
        return f"proc gpu={self.gpu} pid={self.pid} used_mib={self.used_mib} name={self.name}"


@dataclass
class FakeNvmlState:
    """Everything the fake NVML answers; `write()` puts it where the library reads it."""

    path: Path
    registry: Path
    gpus: list[FakeGpu] = field(default_factory=list)
    processes: list[FakeProcess] = field(default_factory=list)
    driver: str = "580.95.05"
    cuda: int = 13000
    init_error: int = 0

    def uuids(self) -> list[str]:
        return [g.uuid or derived_uuid(i, g.name) for i, g in enumerate(self.gpus)]

    def render(self) -> str:
        lines = ["# c3 fake nvml state v1", f"driver {self.driver}", f"cuda {self.cuda}",
                 f"registry {self.registry}", f"init_error {self.init_error}"]
        lines += [g.line(i) for i, g in enumerate(self.gpus)]
        lines += [p.line() for p in self.processes]
        return "\n".join(lines) + "\n"

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.registry.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(self.render())
        os.replace(tmp, self.path)  # a reader never sees half a file


class FakeNvml:
    """A live fake NVML: mutate with set_gpus/add_process/…; every change is written at once."""

    def __init__(self, library: Path, workdir: Path):
        self.library = library
        self.state = FakeNvmlState(path=workdir / "nvml-state", registry=workdir / "gpu-registry")
        self.state.write()

    @property
    def state_path(self) -> Path:
        return self.state.path

    @property
    def registry(self) -> Path:
        return self.state.registry

    @property
    def lib_dir(self) -> Path:
        return self.library.parent

    def env(self, base: dict | None = None) -> dict[str, str]:
        """Environment for a subprocess (pynvml or the stub engine) that must see this fake NVML."""
        base = dict(os.environ if base is None else base)
        ld = base.get("LD_LIBRARY_PATH", "")
        base["LD_LIBRARY_PATH"] = f"{self.lib_dir}{os.pathsep}{ld}" if ld else str(self.lib_dir)
        base["C3_FAKE_NVML_STATE"] = str(self.state.path)
        base["C3_GPU_REGISTRY"] = str(self.state.registry)
        return base

    def set_gpus(self, gpus: list[FakeGpu]) -> list[str]:
        """Replace the GPUs; returns their UUIDs in index order."""
        self.state.gpus = list(gpus)
        self.state.write()
        return self.state.uuids()

    def uuids(self) -> list[str]:
        return self.state.uuids()

    def add_process(self, gpu: str | int, pid: int, used_mib: int = 1024, name: str = "python3") -> FakeProcess:
        proc = FakeProcess(gpu=str(gpu), pid=pid, used_mib=used_mib, name=name)
        self.state.processes.append(proc)
        self.state.write()
        return proc

    def clear_processes(self) -> None:
        self.state.processes = []
        self.state.write()

    def update(self, **changes) -> None:
        """Change top-level fields (driver, cuda, init_error) and rewrite."""
        for key, value in changes.items():
            setattr(self.state, key, value)
        self.state.write()

    def update_gpu(self, index: int, **changes) -> None:
        for key, value in changes.items():
            setattr(self.state.gpus[index], key, value)
        self.state.write()


def main(argv: list[str]) -> int:
    if argv[:1] == ["build"]:
        print(build_library().parent)
        return 0
    if argv[:1] == ["demo"] and len(argv) == 2:
        path = Path(argv[1]).resolve()
        state = FakeNvmlState(path=path, registry=path.parent / "gpu-registry",
                              gpus=[FakeGpu(), FakeGpu(name="NVIDIA GeForce RTX 5090", total_mib=32607, sm="12.0",
                                                       limit_w=575, flags=("noecc",))])
        state.write()
        print(f"wrote {path} (registry {state.registry})")
        return 0
    print("usage: fake_nvml.py build | demo STATE_FILE", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
