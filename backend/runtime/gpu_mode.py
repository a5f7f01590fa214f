"""How GPUs reach a container: `nvidia` (device request by UUID), `cdi` (`nvidia.com/gpu=<UUID>`),
`env` (NVIDIA_VISIBLE_DEVICES only — the simulator and tests).

Pinning is by device, never by a CUDA mask: a CDI runtime ignores NVIDIA_VISIBLE_DEVICES and a compose
that reserves every device lets CUDA pick GPU 0 (club-3090 #610, #447), and a UUID-form
CUDA_VISIBLE_DEVICES crashes some vLLM releases (#750). So `nvidia` and `cdi` set no CUDA mask at all:
the container sees exactly its devices, numbered from 0.

Pure functions over what the daemon reported (`docker info`) and what the CDI spec folders hold.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.errors import C3Error, EnvironmentProblem, UsageError
from backend.runtime.models import GpuMode
from backend.userfiles import read_text

MODES: tuple[str, ...] = ("nvidia", "cdi", "env")
CDI_SPEC_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))
CDI_GPU_KIND = "nvidia.com/gpu"


def parse_mode(value: str, *, source: str) -> GpuMode:
    """Validate a forced mode (`--gpu-mode` / `C3_GPU_MODE`)."""
    mode = value.strip().lower()
    if mode not in MODES:
        raise UsageError(f"{source}: unknown GPU mode `{value}`", hint="use one of: nvidia, cdi, env")
    return mode  # type: ignore[return-value]


def cdi_gpu_names(spec_dirs: Iterable[Path] = CDI_SPEC_DIRS) -> set[str]:
    """Device names of kind nvidia.com/gpu declared by the CDI specs (`0`, `GPU-…`, `all`)."""
    names: set[str] = set()
    for folder in spec_dirs:
        try:
            files = sorted(p for p in folder.iterdir() if p.suffix in {".json", ".yaml", ".yml"})
        except OSError:
            continue
        for path in files:
            spec = _read_spec(path)
            if not isinstance(spec, dict) or spec.get("kind") != CDI_GPU_KIND:
                continue
            for device in spec.get("devices") or []:
                if isinstance(device, dict) and device.get("name") is not None:
                    names.add(str(device["name"]))
    return names


def _read_spec(path: Path) -> Any:
    try:  # the bounded reader: a FIFO or a device among the specs is skipped, not waited on
        text = read_text(path, what="CDI spec file")
    except C3Error:
        return None
    try:
        if path.suffix == ".json":
            return json.loads(text)
        import yaml

        return yaml.safe_load(text)
    except Exception:  # a broken spec file is the CDI tooling's problem, not a reason to crash
        return None


@dataclass(frozen=True)
class ModeDecision:
    """The chosen mode and why (shown by `pod up` so a surprise is explainable)."""

    mode: GpuMode
    why: str
    cdi_names: frozenset[str] = field(default_factory=frozenset)


def detect_mode(
    info: Mapping[str, Any] | None,
    *,
    simulated: bool,
    forced: str | None = None,
    cdi_names: set[str] | None = None,
    hook_on_path: bool | None = None,
) -> ModeDecision:
    """Decide the GPU mode: forced > simulated probe (env) > daemon's nvidia runtime > CDI specs.

    `info` is the daemon's `docker info` dict. With real GPUs and neither an NVIDIA runtime/hook nor
    a CDI spec, there is no way to pin GPUs: refuse (exit 3) instead of starting an engine on none.
    """
    daemon_cdi_dirs = [Path(d) for d in ((info or {}).get("CDISpecDirs") or [])]
    if cdi_names is None:
        cdi_names = cdi_gpu_names(daemon_cdi_dirs or CDI_SPEC_DIRS)
    names = frozenset(cdi_names)
    if forced:
        return ModeDecision(parse_mode(forced, source="--gpu-mode / C3_GPU_MODE"), "forced", names)
    if simulated:
        return ModeDecision("env", "simulated rig", names)
    runtimes = (info or {}).get("Runtimes") or {}
    if "nvidia" in runtimes:
        return ModeDecision("nvidia", "daemon has the nvidia runtime", names)
    if names and (info is None or daemon_cdi_dirs):
        return ModeDecision("cdi", "CDI specs declare nvidia.com/gpu devices", names)
    if hook_on_path is None:
        hook_on_path = shutil.which("nvidia-container-runtime-hook") is not None
    if hook_on_path:
        # Docker's built-in `--gpus` driver needs only the hook, not a registered runtime.
        return ModeDecision("nvidia", "nvidia-container-runtime-hook is installed", names)
    if names:
        # Docker reads CDI specs only from version 25 on, and only with the feature on (default from 28).
        raise EnvironmentProblem(
            "CDI specs for nvidia.com/gpu exist but this Docker daemon does not use CDI",
            hint='set {"features": {"cdi": true}} in /etc/docker/daemon.json (Docker ≥ 25) and restart dockerd, or force a mode with --gpu-mode',
        )
    raise EnvironmentProblem(
        "Docker cannot pin GPUs: no nvidia runtime, no nvidia-container-runtime-hook, no CDI spec for nvidia.com/gpu",
        hint="install nvidia-container-toolkit (`nvidia-ctk runtime configure` or `nvidia-ctk cdi generate`), or force a mode with --gpu-mode",
    )


def forced_mode(cli_value: str | None) -> str | None:
    """`--gpu-mode` wins over `C3_GPU_MODE`; None when neither is set."""
    from backend.settings import current

    return cli_value or current().gpu_mode or None


@dataclass(frozen=True)
class GpuBinding:
    """What the Docker adapter passes for the GPUs: device requests (plain dicts) and environment."""

    device_requests: list[dict[str, Any]]
    env: dict[str, str]


def binding(mode: GpuMode, uuids: Iterable[str], indices: Iterable[int] = (), cdi_names: frozenset[str] = frozenset()) -> GpuBinding:
    """Device requests and environment that give a container exactly these GPUs."""
    uuids = list(uuids)
    indices = list(indices)
    if mode == "nvidia":
        request = {"Driver": "nvidia", "DeviceIDs": uuids, "Capabilities": [["gpu"]]}
        # The toolkit reads capabilities from this variable too; `compute,utility` gives CUDA and nvidia-smi.
        return GpuBinding([request], {"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"})
    if mode == "cdi":
        slots: list[int | None] = [*indices] if indices else [None] * len(uuids)
        names = [_cdi_name(uuid, index, cdi_names) for uuid, index in zip(uuids, slots, strict=True)]
        return GpuBinding([{"Driver": "cdi", "DeviceIDs": names}], {})
    return GpuBinding([], {"NVIDIA_VISIBLE_DEVICES": ",".join(uuids)})


def _cdi_name(uuid: str, index: int | None, declared: frozenset[str]) -> str:
    # nvidia-ctk declares UUID names by default; a spec generated with the index-only strategy lacks them.
    if declared and uuid not in declared and index is not None and str(index) in declared:
        return f"{CDI_GPU_KIND}={index}"
    return f"{CDI_GPU_KIND}={uuid}"
