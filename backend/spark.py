"""DGX Spark host check: are the packages vLLM's JIT builds need installed, and install the missing.

vLLM compiles kernels on first use on a new architecture like the GB10 (sm_121): Triton builds a small
C launcher against Python.h, FlashInfer and torch C++ extensions build with ninja and nvcc. Each
missing piece fails late, at first request or at CUDA-graph capture, with a compiler error in the
middle of a long boot log. The list below checks them before anything boots.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from backend.errors import EnvironmentProblem, Refused


class Prereq(BaseModel):
    """One thing the JIT builds need."""

    name: str
    """Debian/Ubuntu package (or a label for something apt cannot install)."""
    why: str
    """What breaks without it."""
    apt: bool = True
    """Installable with apt-get from the distribution's own archive."""
    present: bool = False
    """Found on this machine."""
    detail: str = ""
    """What was found (a path, a version) or what to do."""


class DoctorReport(BaseModel):
    """The result of `c3 spark doctor`."""

    machine: str
    """`uname -m`."""
    gpus: list[str] = Field(default_factory=list)
    """GPU names nvidia-smi lists (empty without nvidia-smi)."""
    is_spark: bool
    """aarch64 with a GB10 GPU."""
    items: list[Prereq]
    """Every check, present or not."""

    @property
    def missing_apt(self) -> list[str]:
        """Missing packages apt-get can install."""
        return [i.name for i in self.items if not i.present and i.apt]

    @property
    def ok(self) -> bool:
        """Everything present."""
        return all(i.present for i in self.items)


# (package, what breaks without it)
PACKAGES: list[tuple[str, str]] = [
    ("build-essential", "gcc/g++/make: Triton's launcher and torch C++ extensions are compiled at run time"),
    ("python3-dev", "Python.h: Triton compiles its CUDA launcher against it (`fatal error: Python.h`)"),
    ("ninja-build", "ninja: FlashInfer and torch.utils.cpp_extension JIT builds run through it"),
    ("python3-venv", "`python3 -m venv` for a native vLLM install (Ubuntu's python3 refuses pip installs, PEP 668)"),
    ("git", "pip installs of vLLM/FlashInfer from source refs"),
]

Runner = Callable[[list[str]], tuple[int, str]]


def _run(argv: list[str]) -> tuple[int, str]:
    try:
        done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as exc:
        return 127, str(exc)
    return done.returncode, done.stdout


def dpkg_installed(package: str, run: Runner = _run) -> bool:
    """`dpkg-query` says the package is installed."""
    rc, out = run(["dpkg-query", "-W", "-f=${Status}", package])
    return rc == 0 and out.strip().endswith("install ok installed")


def find_nvcc() -> str | None:
    """nvcc on PATH or in the usual CUDA prefixes."""
    found = shutil.which("nvcc")
    if found:
        return found
    for candidate in sorted(Path("/usr/local").glob("cuda*/bin/nvcc"), reverse=True):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def doctor(run: Runner = _run, nvcc: Callable[[], str | None] = find_nvcc) -> DoctorReport:
    """Check every prerequisite on this machine."""
    if shutil.which("dpkg-query") is None and run is _run:
        raise EnvironmentProblem("dpkg-query not found: `c3 spark` supports Debian/Ubuntu (DGX OS) only")
    items: list[Prereq] = []
    for package, why in PACKAGES:
        present = dpkg_installed(package, run)
        items.append(Prereq(name=package, why=why, present=present, detail="installed" if present else "missing"))
    path = nvcc()
    items.append(
        Prereq(
            name="cuda-toolkit (nvcc)",
            why="nvcc: FlashInfer/vLLM kernels for sm_121 are compiled on first use",
            apt=False,
            present=path is not None,
            detail=path or "not found; install NVIDIA's CUDA toolkit (DGX OS ships it in /usr/local/cuda) and put its bin/ on PATH",
        )
    )
    rc, out = run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    gpus = [line.strip() for line in out.splitlines() if line.strip()] if rc == 0 else []
    machine = platform.machine()
    return DoctorReport(
        machine=machine,
        gpus=gpus,
        is_spark=machine == "aarch64" and any("GB10" in g for g in gpus),
        items=items,
    )


def install_commands(report: DoctorReport, *, root: bool | None = None) -> list[list[str]]:
    """apt-get commands that install the missing packages (with `sudo -n` when not root)."""
    missing = report.missing_apt
    if not missing:
        return []
    root = os.geteuid() == 0 if root is None else root
    prefix = [] if root else ["sudo", "-n"]
    return [
        [*prefix, "apt-get", "update"],
        [*prefix, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "--no-install-recommends", *missing],
    ]


def install(report: DoctorReport, echo: Callable[[str], None]) -> int:
    """Run the install commands, streaming their output; returns the exit code of the first failure (0 when done)."""
    commands = install_commands(report)
    if commands and commands[0][0] == "sudo":
        rc, _ = _run(["sudo", "-n", "true"])
        if rc != 0:
            raise Refused("installing packages needs root or passwordless sudo", hint="run it as root, or `sudo c3 spark install-prereqs`")
    for argv in commands:
        echo("$ " + " ".join(argv))
        done = subprocess.run(argv, check=False, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            return done.returncode
    return 0
