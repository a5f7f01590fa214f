"""Issue 24, for real: one model split across two machines by the real vLLM (CPU build), through
`c3 shard start --backend mp` on the two network-namespace test hosts reached by name over real SSH.

c3 runs on the head (inside h1's namespace, as on a real head node); rank 1 runs on h2 over SSH. The two
ranks talk over the hosts' cluster link only (gloo over TCP: "CPU SHM communicator disabled … falling back
to torch.distributed" on rank 1). Proven, for pipeline parallel 2 and tensor parallel 2:
- completions are answered through the head's OpenAI endpoint;
- both ranks' boot logs come back through c3 (prefixed by node) and say how much KV each rank has;
- `c3 shard status --backend mp` lists each rank with its node and state, and a rank killed while
  serving is reported within 5 s, naming its node;
- `c3 shard stop` leaves no process on either host.

For PP, c3 adds what the CPU build needs (`-cc.mode=2 -cc.backend=eager`, `VLLM_CPU_OMP_THREADS_BIND=nobind`),
and refuses PP with `--enforce-eager` (known to die on the first request) before anything starts."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from tests.shard.conftest import API_PORT, get, parts_of, stop_c3, write_script
from tests.support import wait_until

pytestmark = [pytest.mark.real_engine, pytest.mark.netns, pytest.mark.sshd]

# Offline, no usage report, one thread per rank (two ranks share this 2-core machine), 1 GiB of KV.
ENGINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
              "VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "1"}


def engine_wrapper(shard_rig, real_engines) -> str:
    """The `--vllm` both nodes run: the rig's real vLLM, run by its own interpreter (so c3's probe reads the
    real package metadata, `0.32.0+cpu`), with temp files per rank and a vLLM cache root per node that outlives
    the test, as each machine's ~/.cache/vllm does — the two "machines" share one file system here, real ones do not."""
    from scripts.rig.real_engines import vllm_cache_root

    real = real_engines.vllm_venv / "bin" / "vllm"
    node_caches = str(vllm_cache_root() / "node-")
    body = (f"#!{real_engines.vllm_python}\n"
            "import os, sys\n"
            f"scratch = os.path.join({str(shard_rig.folder)!r}, 'rank-' + os.environ.get('VLLM_HOST_IP', 'x'))\n"
            "os.makedirs(os.path.join(scratch, 'tmp'), exist_ok=True)\n"
            "os.environ.update(TMPDIR=os.path.join(scratch, 'tmp'), "
            f"VLLM_CACHE_ROOT={node_caches!r} + os.environ.get('VLLM_HOST_IP', 'x'))\n"
            f"os.execv({str(real)!r}, [{str(real)!r}, *sys.argv[1:]])\n")
    return write_script(shard_rig.folder / "vllm-real", body)


def write_profile(name: str, model: Path, args: list[str]) -> None:
    from backend import paths

    folder = paths.profiles_dir()
    folder.mkdir(parents=True, exist_ok=True)
    profile = {"model": str(model), "args": args, "env": ENGINE_ENV, "public_env": sorted(ENGINE_ENV)}
    (folder / f"{name}.yaml").write_text(json.dumps(profile))  # JSON is YAML


def test_pp_with_enforce_eager_is_refused_before_anything_starts(shard_rig, real_engines):
    shard_rig.register()
    write_profile("pp-eager", real_engines.model("dense"), ["--max-model-len", "512", "--enforce-eager"])
    r = shard_rig.c3("shard", "start", "--profile", "pp-eager", "--nodes", "a,b", "--backend", "mp", "--tp", "1", "--pp", "2",
                     "--gpus-per-node", "1", "--vllm", engine_wrapper(shard_rig, real_engines), timeout=180)
    assert r.returncode == 1, r.stdout + r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("c3: error: ")]
    assert len(errors) == 1 and errors[0].startswith("c3: error: phase plan failed on node a: vLLM 0.32.0+cpu (CPU build) with pipeline parallel and --enforce-eager"), r.stderr
    assert "drop --enforce-eager" in r.stderr and "Traceback" not in r.stderr
    assert shard_rig.leftovers() == {shard_rig.head.name: [], shard_rig.worker.name: []}


@pytest.mark.timeout(1200)  # two real vLLM ranks boot on 2 cores: 90–125 s on a quiet box, minutes more under load
@pytest.mark.parametrize(("tp", "pp", "args"), [
    (1, 2, ["--max-model-len", "512"]),
    (2, 1, ["--max-model-len", "512", "--enforce-eager"]),
], ids=["pp2", "tp2"])
def test_one_model_split_over_two_hosts_serves_and_stops_clean(shard_rig, real_engines, tp, pp, args):
    shard_rig.register()
    name = f"real-tp{tp}-pp{pp}"
    write_profile(name, real_engines.model("dense"), [*args, "--served-model-name", "tiny"])
    log = shard_rig.folder / f"{name}.log"
    proc = shard_rig.c3_background(
        "shard", "start", "--profile", name, "--nodes", "a,b", "--backend", "mp", "--tp", str(tp), "--pp", str(pp),
        "--gpus-per-node", "1", "--vllm", engine_wrapper(shard_rig, real_engines), "--master-port", str(29560 + tp), log=log,
    )
    base = f"http://{shard_rig.head.address}:{API_PORT}/v1"
    try:
        started = time.monotonic()
        wait_until(lambda: get(f"{base}/models"), 900, f"real vLLM tp={tp} pp={pp} serving", interval=1, proc=proc, log=log)
        ready_s = time.monotonic() - started
        answers = [get(f"{base}/completions", {"model": "tiny", "prompt": f"one two three {i}", "max_tokens": 8, "temperature": 0}, timeout=120)
                   for i in range(3)]
        assert all(a and a["choices"][0]["finish_reason"] in ("length", "stop") and a["usage"]["completion_tokens"] > 0 for a in answers), answers
        # c3 itself calls the shard serving only once a real token came back through the head (phase first_token).
        wait_until(lambda: "c3: serving: first token" in log.read_text(errors="replace"), 300, "c3's first token", interval=1, proc=proc, log=log)
        text = log.read_text(errors="replace")
        assert re.search(r"c3: serving: first token '.*' from tiny after [\d.]+s", text), text[-4000:]
        assert text.index("c3: phase first_token: ") < text.index("c3: serving: first token")
        if pp > 1:
            assert "-cc.mode=2 -cc.backend=eager" in text and "VLLM_CPU_OMP_THREADS_BIND=nobind" in text
        # Each rank's own boot log came back through c3, prefixed by its node, with its KV memory.
        for node in ("a", "b"):
            kv = [line for line in text.splitlines() if line.startswith(f"[{node}]") and re.search(r"GiB for KV cache|KV cache", line)]
            assert kv, f"no KV line from rank on {node}:\n" + text[-4000:]
        assert re.search(r"CPU KV cache size: [\d,]+ tokens", text), text[-4000:]
        # c3 names each rank's KV memory from that rank's own line, and the rank that binds.
        summary = re.search(r"^c3: KV per rank: rank 0 on a ([\d.]+) GiB, rank 1 on b ([\d.]+) GiB; (every rank alike, none binds|binding: rank [01] on [ab])",
                            text, re.M)
        assert summary, text[-4000:]
        for node, gib in (("a", summary[1]), ("b", summary[2])):
            own = [m[1] for line in text.splitlines() if line.startswith(f"[{node}]") and (m := re.search(r"set \(([\d.]+)/[\d.]+\) GiB for KV cache", line))]
            assert own and float(own[0]) == float(gib), (node, own, gib)

        rc, seen = parts_of(shard_rig, "mp")
        assert rc == 0 and seen["a"]["state"] == "running" and seen["b"]["state"] == "running", seen
        assert seen["a"]["part"] == "vllm serve rank 0 (API)" and seen["b"]["part"] == "vllm serve rank 1 (headless)"

        # A rank killed while serving: reported by status within 5 s, naming its node.
        from scripts.rig.netns_cleanup import in_netns

        pid = int(seen["b"]["pid"])
        assert in_netns(pid, shard_rig.worker.netns)
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        rc, seen = wait_until(lambda: (s := parts_of(shard_rig, "mp"))[1]["b"]["state"] == "not running" and s, 5, "the killed rank reported")
        reported_s = time.monotonic() - killed
        assert rc == 1 and seen["b"]["node"] == "b"
        plain = shard_rig.c3("shard", "status", "--nodes", "a,b", "--backend", "mp")
        assert "b: vllm serve rank 1 (headless): not running" in plain.stdout and "not running: vllm serve rank 1 (headless) on b" in plain.stderr

        stop = shard_rig.c3("shard", "stop", f"a-{29560 + tp}", "--nodes", "a,b", "--backend", "mp")
        assert stop.returncode == 0, stop.stdout + stop.stderr
        proc.wait(timeout=120)
        wait_until(lambda: shard_rig.leftovers() == {shard_rig.head.name: [], shard_rig.worker.name: []}, 60, "no process left in either host",
                   interval=0.5)
        print(f"real vLLM tp={tp} pp={pp} over two hosts: serving {ready_s:.0f}s after start; killed rank reported in {reported_s:.1f}s")
    finally:
        stop_c3(proc)
        shard_rig.kill_leftovers()
