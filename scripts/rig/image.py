"""Build the test images locally, with no registry pulls, and ship them to other daemons.

    python3 scripts/rig/image.py build                  # c3-rig-base:bookworm, then c3-stub:test
    python3 scripts/rig/image.py ship c3-stub:test unix:///run/h1/docker.sock

1. `c3-rig-base:bookworm`: a Debian bookworm root filesystem with python3, made by
   `mmdebstrap --variant=apt --include=python3 --format=tar bookworm` from the host's own apt sources
   (about 20 s), cached as a tar under .rig/rootfs/ keyed by its inputs, then `docker import`ed.
2. `c3-stub:test`: that base plus the stub engine's modules (backend/sim/stub_*.py, under
   /opt/c3/backend/sim/) and /opt/c3/stub_engine.py, a launcher that runs them, as the entrypoint (and
   `vllm`/`llama-server` shims that exec it), labelled `io.c3.stub-hash=<sha256 of those files>`;
   rebuilt when the stub changes.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STUB_DIR = ROOT / "backend" / "sim"
"""The stub engine's modules: `stub_engine.py` and its `stub_*.py` siblings (standard library only)."""
BASE_IMAGE = "c3-rig-base:bookworm"
STUB_IMAGE = "c3-stub:test"
HASH_LABEL = "io.c3.stub-hash"
INPUTS_LABEL = "io.c3.rootfs-inputs"
SUITE = "bookworm"
INCLUDE = "python3"

DOCKERFILE = """\
FROM {base}
COPY c3/ /opt/c3/
COPY shim /usr/local/bin/vllm
COPY shim /usr/local/bin/llama-server
LABEL {label}={digest}
EXPOSE 8000
STOPSIGNAL SIGTERM
ENTRYPOINT ["python3", "/opt/c3/stub_engine.py"]
"""
LAUNCHER = """\
#!/usr/bin/env python3
# c3 test image: runs the stub engine, whose modules are under /opt/c3/backend/sim/ (as in the repository).
import runpy
import sys

sys.path.insert(0, "/opt/c3")
runpy.run_module("backend.sim.stub_engine", run_name="__main__", alter_sys=True)
"""
SHIM = '#!/bin/sh\n# c3 test image: the stub engine stands in for this engine\nexec python3 /opt/c3/stub_engine.py "$@"\n'


def cache_dir() -> Path:
    return Path(os.environ.get("C3_RIG_CACHE") or ROOT / ".rig")


def stub_files() -> dict[str, bytes]:
    """What the image carries under /opt/c3/: the stub's modules with their packages' __init__.py files
    (the stub imports them as `backend.sim.stub_*`), and the launcher the entrypoint and shims run."""
    files = {"stub_engine.py": LAUNCHER.encode()}
    for path in [ROOT / "backend" / "__init__.py", STUB_DIR / "__init__.py", *sorted(STUB_DIR.glob("stub_*.py"))]:
        files[path.relative_to(ROOT).as_posix()] = path.read_bytes()
    return files


def stub_digest() -> str:
    h = hashlib.sha256()
    for name, data in stub_files().items():
        h.update(b"%d:%s\0%d:" % (len(name), name.encode(), len(data)) + data)
    return h.hexdigest()


def rootfs_inputs() -> str:
    """What the root filesystem depends on: suite, packages and the host's apt sources."""
    h = hashlib.sha256(f"{SUITE} {INCLUDE}".encode())
    for path in sorted([Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*")]):
        if path.is_file():
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


@contextlib.contextmanager
def rig_lock(name: str, directory: Path | None = None):
    """Serialise builders (several test sessions may start at once on one machine); the lock file lives
    in `directory` (default: the rig's cache folder)."""
    folder = directory if directory is not None else cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def has_image(client, tag: str):
    import docker

    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None


def build_rootfs(log=print) -> Path:
    """The cached bookworm+python3 rootfs tar (made with mmdebstrap when missing)."""
    target = cache_dir() / "rootfs" / f"{SUITE}-{INCLUDE}-{rootfs_inputs()}.tar"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".partial.tar")
    started = time.monotonic()
    log(f"rig: mmdebstrap {SUITE} with {INCLUDE} (host apt sources) → {target}")
    result = subprocess.run(["mmdebstrap", "--variant=apt", f"--include={INCLUDE}", "--format=tar", SUITE, str(tmp)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"mmdebstrap failed ({result.returncode}): {result.stderr.strip()[-1500:]}")
    os.replace(tmp, target)
    log(f"rig: rootfs ready in {time.monotonic() - started:.1f}s ({target.stat().st_size >> 20} MiB)")
    return target


def _current(client, tag: str, label: str, value: str) -> bool:
    """True when `tag` exists in this daemon and was built from `value` (the inputs recorded in `label`)."""
    image = has_image(client, tag)
    return bool(image) and image.labels.get(label) == value


def ensure_base_image(client, log=print) -> str:
    """`c3-rig-base:bookworm` in this daemon (imported from the cached rootfs when missing or stale)."""
    inputs = rootfs_inputs()
    if _current(client, BASE_IMAGE, INPUTS_LABEL, inputs):
        return BASE_IMAGE
    with rig_lock("base-image"):  # checked again under the lock: another session may have built it meanwhile
        if _current(client, BASE_IMAGE, INPUTS_LABEL, inputs):
            return BASE_IMAGE
        rootfs = build_rootfs(log)
        started = time.monotonic()
        repo, tag = BASE_IMAGE.split(":")
        client.api.import_image_from_file(str(rootfs), repository=repo, tag=tag,
                                          changes=[f"LABEL {INPUTS_LABEL}={inputs}", 'CMD ["python3"]'])
        log(f"rig: docker import {BASE_IMAGE} in {time.monotonic() - started:.1f}s")
    return BASE_IMAGE


def build_context(digest: str) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        entries = [("Dockerfile", DOCKERFILE.format(base=BASE_IMAGE, label=HASH_LABEL, digest=digest).encode(), 0o644),
                   *((f"c3/{name}", data, 0o755 if name == "stub_engine.py" else 0o644) for name, data in stub_files().items()),
                   ("shim", SHIM.encode(), 0o755)]
        for name, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return buf


def ensure_stub_image(client, log=print) -> str:
    """`c3-stub:test` carrying the current stub engine, backend/sim/stub_*.py (rebuilt only when it changed)."""
    digest = stub_digest()
    if _current(client, STUB_IMAGE, HASH_LABEL, digest):
        return STUB_IMAGE
    ensure_base_image(client, log)
    with rig_lock("stub-image"):
        if _current(client, STUB_IMAGE, HASH_LABEL, digest):
            return STUB_IMAGE
        started = time.monotonic()
        client.images.build(fileobj=build_context(digest), custom_context=True, tag=STUB_IMAGE, rm=True,
                            forcerm=True, pull=False)
        client.api.tag(STUB_IMAGE, STUB_IMAGE.split(":")[0], digest[:12])
        log(f"rig: docker build {STUB_IMAGE} ({digest[:12]}) in {time.monotonic() - started:.1f}s")
    return STUB_IMAGE


def ship_image(tag: str, to_host: str, from_host: str | None = None, timeout: int = 300) -> None:
    """Copy an image to another daemon the way a user would: `docker save TAG | docker -H HOST load`."""
    env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    save_cmd = ["docker"] + (["-H", from_host] if from_host else []) + ["save", tag]
    save = subprocess.Popen(save_cmd, stdout=subprocess.PIPE, env=env)
    try:
        load = subprocess.run(["docker", "-H", to_host, "load", "-q"], stdin=save.stdout, capture_output=True,
                              text=True, env=env, timeout=timeout)
    finally:
        save.stdout.close()
        save_rc = save.wait(timeout=timeout)
    if save_rc != 0 or load.returncode != 0:
        raise RuntimeError(f"shipping {tag} to {to_host} failed: save rc={save_rc}, load: {load.stderr.strip()}")


def main(argv: list[str]) -> int:
    import docker

    if argv[:1] == ["build"]:
        client = docker.from_env(timeout=600)
        started = time.monotonic()
        print(ensure_stub_image(client), f"ready in {time.monotonic() - started:.1f}s")
        return 0
    if argv[:1] == ["ship"] and len(argv) in (3, 4):
        ship_image(argv[1], argv[2], argv[3] if len(argv) == 4 else None)
        return 0
    print("usage: image.py build | ship TAG TO_HOST [FROM_HOST]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
