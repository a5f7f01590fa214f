"""Engine adapters: the command line each engine runs inside its container, from a catalog entry.

Pure functions returning argv lists — no Docker, no I/O — so every flag is unit-tested. The argv is
the whole process command (the Docker adapter sets it as the entrypoint), so an image's own
entrypoint never silently prepends or swallows arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.errors import Refused
from backend.models import CatalogEntry

#: Port each engine listens on inside its container when the entry names none.
DEFAULT_CONTAINER_PORT = {"vllm": 8000, "llamacpp": 8080, "sglang": 30000}

#: Where the host's HF cache is mounted; engines find downloaded weights there.
CONTAINER_HF_CACHE = "/root/.cache/huggingface"


@dataclass(frozen=True)
class EngineCommand:
    """The rendered launch of one engine."""

    argv: list[str]
    """Full command inside the container."""
    container_port: int
    """Port the engine listens on inside the container."""
    health_path: str
    """Readiness path."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment the engine needs (catalog env merged over the adapter's)."""


def served_names(entry: CatalogEntry) -> list[str]:
    """Names clients may ask for: the HF repo id first (what responses report), then the slug's short name."""
    short = entry.slug.split("/", 1)[-1]
    names = [entry.model] if entry.model else []
    if short and short not in names:
        names.append(short)
    return names


def render(entry: CatalogEntry) -> EngineCommand:
    """The engine command for a catalog entry; Refused for a custom entry without a command."""
    renderers = {"vllm": _vllm, "llamacpp": _llamacpp, "sglang": _sglang, "custom": _custom}
    return renderers[entry.engine](entry)


def with_sleep_mode(command: EngineCommand) -> EngineCommand:
    """A vLLM launch with sleep mode (a pod's `sleep_mode: true`): `--enable-sleep-mode` makes level 1 free the
    weights' and KV memory (c3 pods run on GPUs; vLLM's CPU build refuses the flag: "Sleep mode is not supported on
    current platform"), and `VLLM_SERVER_DEV_MODE=1` mounts the `/sleep`, `/wake_up`, `/is_sleeping` routes the
    gateway drives (vLLM has no other way to reach them over HTTP). A catalog entry's own env wins."""
    argv = list(command.argv)
    if "--enable-sleep-mode" not in argv:
        argv.append("--enable-sleep-mode")
    return EngineCommand(argv, command.container_port, command.health_path, {"VLLM_SERVER_DEV_MODE": "1", **command.env})


def _port(entry: CatalogEntry) -> int:
    return entry.container_port or DEFAULT_CONTAINER_PORT[entry.engine]


def _vllm(entry: CatalogEntry) -> EngineCommand:
    port = _port(entry)
    argv = ["vllm", "serve", entry.model, "--served-model-name", *served_names(entry)]
    if entry.revision:
        argv += ["--revision", entry.revision]
    argv += [
        "--tensor-parallel-size", str(entry.tp),
        "--pipeline-parallel-size", str(entry.pp),
    ]
    if entry.max_model_len:
        argv += ["--max-model-len", str(entry.max_model_len)]
    argv += ["--gpu-memory-utilization", _fraction(entry.gpu_memory_utilization)]
    if entry.kv_cache_dtype and entry.kv_cache_dtype != "auto":
        argv += ["--kv-cache-dtype", entry.kv_cache_dtype]
    if entry.max_num_seqs:
        argv += ["--max-num-seqs", str(entry.max_num_seqs)]
    if entry.max_num_batched_tokens:
        argv += ["--max-num-batched-tokens", str(entry.max_num_batched_tokens)]
    argv += ["--host", "0.0.0.0", "--port", str(port), *entry.extra_args]
    return EngineCommand(argv, port, entry.health_path, dict(entry.env))


# llama.cpp's cache types; vLLM-style names map onto the nearest llama.cpp type.
_LLAMA_KV = {"f16": "f16", "fp16": "f16", "bf16": "bf16", "q8_0": "q8_0", "fp8": "q8_0", "q4_0": "q4_0", "f32": "f32"}


def _llamacpp(entry: CatalogEntry) -> EngineCommand:
    port = _port(entry)
    argv = ["/app/llama-server"]
    if entry.model.startswith("/"):
        argv += ["-m", entry.model]
    else:
        repo = entry.model
        quant = (entry.weights or "").removeprefix("gguf-")
        if quant and entry.weights and entry.weights.startswith("gguf-"):
            repo = f"{repo}:{quant.upper()}"
        argv += ["-hf", repo]
    argv += ["--alias", served_names(entry)[0]] if entry.model else []
    if entry.max_model_len:
        argv += ["-c", str(entry.max_model_len)]
    argv += ["-ngl", "999"]
    if entry.max_num_seqs:
        argv += ["-np", str(entry.max_num_seqs)]
    gpus = entry.gpu_count
    if gpus > 1:
        # llama.cpp splits by layer across the visible cards; an even tensor split is the neutral default.
        argv += ["-sm", "layer", "-ts", ",".join(["1"] * gpus)]
    kv = _LLAMA_KV.get(entry.kv_cache_dtype)
    if kv and entry.kv_cache_dtype != "auto":
        argv += ["-ctk", kv, "-ctv", kv]
    argv += ["--host", "0.0.0.0", "--port", str(port), *entry.extra_args]
    # Keep -hf downloads in the mounted HF cache so a recreated container does not download again.
    env = {"LLAMA_CACHE": f"{CONTAINER_HF_CACHE}/llama.cpp", **entry.env}
    return EngineCommand(argv, port, entry.health_path, env)


def _sglang(entry: CatalogEntry) -> EngineCommand:
    port = _port(entry)
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", entry.model]
    names = served_names(entry)
    if names:
        argv += ["--served-model-name", names[0]]
    if entry.revision:
        argv += ["--revision", entry.revision]
    argv += ["--tp", str(entry.tp)]
    if entry.pp > 1:
        argv += ["--pp-size", str(entry.pp)]
    argv += ["--mem-fraction-static", _fraction(entry.gpu_memory_utilization)]
    if entry.max_model_len:
        argv += ["--context-length", str(entry.max_model_len)]
    if entry.kv_cache_dtype and entry.kv_cache_dtype != "auto":
        argv += ["--kv-cache-dtype", entry.kv_cache_dtype]
    if entry.max_num_seqs:
        argv += ["--max-running-requests", str(entry.max_num_seqs)]
    if entry.max_num_batched_tokens:
        argv += ["--chunked-prefill-size", str(entry.max_num_batched_tokens)]
    argv += ["--host", "0.0.0.0", "--port", str(port), *entry.extra_args]
    return EngineCommand(argv, port, entry.health_path, dict(entry.env))


def _custom(entry: CatalogEntry) -> EngineCommand:
    if not entry.command:
        raise Refused(
            f"catalog entry {entry.slug} (engine custom) has no command",
            hint="give it `command: [...]` and `container_port:` in its catalog.d file",
        )
    if not entry.container_port:
        raise Refused(f"catalog entry {entry.slug} (engine custom) has no container_port", hint="add `container_port: N`")
    return EngineCommand([*entry.command, *entry.extra_args], entry.container_port, entry.health_path, dict(entry.env))


def _fraction(value: float) -> str:
    return f"{value:.4f}".rstrip("0").rstrip(".")
