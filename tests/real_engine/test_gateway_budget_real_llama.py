"""Three real llama-server pods under a memory budget that holds two, enforced by Docker (issue 28):
the gateway's swaps keep the estate inside it — 0 OOM kills, 0 failed requests, 0 thrash, every swap the
one the fit-check predicts — and without the gateway three of the same engines in the budget get one of
them OOM-killed (the negative control: the budget bites, and the OOM detector sees it).

The model is `big.gguf` (scripts/rig/big_gguf.py, ~245 MB of F16 weights, loaded with `-lm none` so they
are anonymous memory the kernel must charge, not page cache it could drop). Pods `a` and `c` share GPU 0,
`b` has GPU 1 (two fake GPUs stand for the budget's two slots). The fit-check prices the pod (config.json +
the GGUF's tensor data); its host footprint — weights + compute + KV, its prediction without the CUDA
context that a CPU build does not allocate — is each container's `--memory`, and twice it is the budget.
`bench/gateway_swap.py` runs this test with more rounds and reports swap-in times and requests held."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.real_engine.budget import memory_budget, oom_events, under_budget
from tests.runtime.helpers import c3, free_port

pytestmark = [pytest.mark.real_engine, pytest.mark.docker, pytest.mark.nvml]

GPUS = {"a": (0,), "b": (1,), "c": (0,)}
MIN_RESIDENCY_S = 2.0
SHORT, LONG = 4, 48
START = [[("a", SHORT)] * 2, [("b", SHORT)]]
ROUND = [[("c", SHORT)] * 3, [("b", SHORT)] * 2, [("a", SHORT)] * 2,
         # c's two requests arrive while a answers a long one: held (not refused) until it ends, then one swap
         [("a", LONG), ("c", SHORT), ("c", SHORT)], [("a", SHORT)], [("c", SHORT)] * 2]
"""The scripted mix: waves of concurrent requests, one wave after the other."""
SWAP_LOG = re.compile(r"swap: stop (.+) to free GPU ([\d,]+) for pod (\S+)$")


def predicted_swaps(waves: list[list[tuple[str, int]]], fits: dict[str, str]) -> list[tuple[str, list[str]]]:
    """(pod started, pods stopped for it) for every start the mix needs, derived from the fit-check alone:
    a pod may start when its verdict says it fits its GPUs; two pods run together exactly when their GPU
    sets are disjoint; a start stops every running pod that shares a GPU with it."""
    running: set[str] = set()
    out = []
    for wave in waves:
        for pod, _ in wave:
            if pod in running:
                continue
            assert fits[pod] in ("fits", "tight"), fits
            stop = sorted(p for p in running if set(GPUS[p]) & set(GPUS[pod]))
            running = (running - set(stop)) | {pod}
            out.append((pod, stop))
    return out


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self.at: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.at.append(record.created)
        self.lines.append(record.getMessage())

    def last(self, text: str) -> float:
        """When the last line with `text` was logged."""
        return next(at for at, line in zip(reversed(self.at), reversed(self.lines), strict=True) if text in line)


class Timed:
    """Wraps a control: the seconds each start took to serving (`pod up`'s readiness), before placement settles."""

    def __init__(self, control) -> None:
        self.control = control
        self.serving_s: list[float] = []
        start = control.start

        def timed(name: str, timeout_s: float, asleep: tuple[str, ...] = ()):
            result = start(name, timeout_s, asleep)
            self.serving_s.append(result.elapsed_s)
            return result

        control.start = timed


def host_footprint_mib(entry: dict, gpu) -> tuple[int, str]:
    """The fit-check's prediction of what one pod holds outside a CUDA context, and its verdict."""
    from backend.catalog import load_catalog
    from backend.fit import fit_on_gpus
    from backend.models.catalog import CatalogEntry

    report = fit_on_gpus(CatalogEntry(**entry), [gpu], catalog=load_catalog())
    g = report.gpus[0]
    kv_gib = (report.max_model_len or 0) * (report.kv_bytes_per_token or 0) / 1024**3
    return int((g.weights_gib + g.activation_gib + kv_gib) * 1024) + 1, report.verdict


def negative_control(docker_client, budget, image: str, argv: list[str], binds: list[str], pod_mib: int) -> list[str]:
    """Three of the same engines started straight on Docker under the budget: the names the kernel OOM-killed."""
    began = time.time()
    names = [f"c3-budget-control-{os.getpid()}-{i}" for i in range(3)]
    try:
        for name in names:
            docker_client.containers.run(image, entrypoint=argv, name=name, detach=True, volumes=binds, network_mode="none",
                                         cgroup_parent=budget.parent, mem_limit=f"{pod_mib}m", memswap_limit=f"{pod_mib}m")
            time.sleep(2)  # each loads its weights (well under a second) before the next starts
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            states = [docker_client.containers.get(n).attrs["State"] for n in names]
            if any(s["OOMKilled"] for s in states):
                break
            time.sleep(0.5)
        killed = [n for n in names if docker_client.containers.get(n).attrs["State"]["OOMKilled"]]
        events = oom_events(docker_client, began, time.time())
        assert killed and set(killed) <= set(events), (killed, events)
        return killed
    finally:
        for name in names:
            try:
                docker_client.containers.get(name).remove(force=True)
            except Exception:  # noqa: BLE001 - never created
                pass


def run_wave(gw, wave: list[tuple[str, int]]) -> tuple[list[tuple[int, str]], dict[str, int]]:
    """Send a wave (a long request is in flight before the next is sent); (status, pod) per request and the
    most requests each pod had held while it was (re)started."""
    slots = gw.gw.slots.slots
    held: dict[str, int] = {}
    with ThreadPoolExecutor(len(wave)) as pool:
        futures = []
        for pod, tokens in wave:
            futures.append(pool.submit(gw.chat, pod, max_tokens=tokens, ignore_eos=True, timeout=300))
            if tokens == LONG:
                while slots[pod].in_flight == 0 and not futures[-1].done():
                    time.sleep(0.01)
        while not all(f.done() for f in futures):
            for pod, _ in wave:
                held[pod] = max(held.get(pod, 0), slots[pod].waiting)
            time.sleep(0.01)
    return [(status, headers.get("x-c3-pod", body.decode(errors="replace")[:200])) for status, headers, body in (f.result() for f in futures)], held


@pytest.mark.timeout(1200)
def test_three_real_llama_pods_in_a_budget_of_two_swap_by_fit_without_an_oom_kill(pod_rig, real_images, docker_client, monkeypatch, tmp_path):
    from backend.actions.workspace import Workspace
    from backend.gateway.config import GatewayConfig
    from backend.models import Gpu
    from backend.runtime import docker_adapter
    from backend.views.estate_file import estate_path
    from backend.wiring import open_context
    from scripts.rig.real_engines import ensure_big_model
    from tests.gateway.conftest import Counting, Running

    rounds = int(os.environ.get("C3_GATEWAY_SWAP_ROUNDS", "1"))
    waves = START + ROUND * rounds
    big = ensure_big_model()
    hf = docker_adapter.host_hf_cache()
    hf.mkdir(parents=True, exist_ok=True)
    os.link(big / "big.gguf", hf / "big.gguf")  # the container sees the HF cache; a link costs no copy
    gguf_bytes = (big / "big.gguf").stat().st_size
    entry = {"slug": "llamacpp/real-big", "engine": "llamacpp", "image": real_images("llamacpp"), "model": f"{docker_adapter.CONTAINER_HF_CACHE}/big.gguf",
             "tp": 1, "max_model_len": 2048, "max_num_seqs": 1, "health_path": "/health", "config_path": str(big / "config.json"),
             # -lv 4: llama-server logs its buffers, so placement sees a CPU engine at once (without it `pod up` waits its
             # 10 s placement settle for an NVML process that never comes); -lm none: weights in anonymous memory.
             "weights_bytes": gguf_bytes, "extra_args": ["-lv", "4", "-t", "1", "-lm", "none"]}
    pod_rig.add_entry(entry)
    pod_mib, verdict = host_footprint_mib(entry, Gpu(index=0, uuid="GPU-fake-0", name="NVIDIA GeForce RTX 3090", total_mib=24576, sm="8.6"))
    assert verdict == "fits" and pod_mib * 1024 * 1024 > gguf_bytes
    for name, gpus in GPUS.items():
        created = c3("pod", "create", name, "--gpus", ",".join(map(str, gpus)), "--slug", "llamacpp/real-big", "--port", str(free_port()), "--on-demand", "--force")
        assert created.returncode == 0, created.stdout + created.stderr
        pod_rig.append(name)
    lines = Lines()
    logger = logging.getLogger("c3.gateway")
    logger.addHandler(lines)
    monkeypatch.setattr(logger, "level", logging.INFO)
    with memory_budget(docker_client, 2 * pod_mib) as budget:
        monkeypatch.setattr(docker_adapter, "create_kwargs", under_budget(budget, pod_mib, docker_adapter.create_kwargs))
        ws = Workspace(estate_path(None), open_context())
        control = Counting(ws)
        fits = {p.name: p.fit_verdict for p in control.pods()}
        # The negative control, on pod a's own container as `pod up` made it (image, command line, mounts).
        assert control.start("a", 300).ok
        made = docker_client.containers.get("c3-a").attrs
        argv, binds = made["Config"]["Entrypoint"] + (made["Config"]["Cmd"] or []), made["HostConfig"]["Binds"]
        control.stop("a")
        killed = negative_control(docker_client, budget, made["Config"]["Image"], argv, binds, pod_mib)

        config = GatewayConfig(host="127.0.0.1", port=0, min_residency_s=MIN_RESIDENCY_S, swap_wait_s=300, boot_timeout_s=300,
                               state_dir=tmp_path / "gateway")
        control = Counting(ws)
        timed = Timed(control)
        gw = Running(config, control)
        began = time.time()
        answers, swaps, peaks = [], [], {}
        try:
            for wave in waves:
                before = {pod: gw.gw.slots.slots[pod].last_swap for pod, _ in wave}
                got, held = run_wave(gw, wave)
                answers += got
                for pod in dict.fromkeys(p for p, _ in wave):
                    record = gw.gw.slots.slots[pod].last_swap
                    if record is not None and record is not before[pod]:
                        booting = lines.last(f"starting pod {pod} for a request")
                        swaps.append({"pod": pod, "stopped": record.stopped, "gpus": record.gpus, "took_s": record.took_s, "ok": record.ok,
                                      "held": held[pod], "stop_s": booting - record.at, "boot_s": lines.last(f"pod {pod} serving after") - booting,
                                      "serving_s": booting - record.at + timed.serving_s[-1]})
                for pod in GPUS:  # each running container's own high-water mark
                    try:
                        peak = budget.peak_mib(docker_client.containers.get(f"c3-{pod}").id)
                    except Exception:  # noqa: BLE001 - not running
                        peak = None
                    if peak is not None:
                        peaks[pod] = max(peaks.get(pod, 0.0), peak)
        finally:
            gw.close()
            for pod in GPUS:
                try:
                    docker_client.containers.get(f"c3-{pod}").remove(force=True)
                except Exception:  # noqa: BLE001 - already gone
                    pass
            logger.removeHandler(lines)
        ooms = oom_events(docker_client, began, time.time())

    expected = predicted_swaps(waves, fits)
    failed = [a for a in answers if a[0] != 200]
    planned = [(m.group(3), re.findall(r"(\S+) \(idle, resident \d+s\)", m.group(1)), m.group(2)) for m in map(SWAP_LOG.search, lines.lines) if m]
    resident = [int(s) for m in map(SWAP_LOG.search, lines.lines) if m for s in re.findall(r"resident (\d+)s", m.group(1))]
    print(f"\nbudget {2 * pod_mib} MiB = 2 × the fit's host footprint {pod_mib} MiB; peak per pod {peaks} MiB; negative control: "
          f"{killed} OOM-killed; {len(answers)} requests, {len(swaps)} swaps: "
          + ", ".join(f"{s['pod']} in {s['took_s']:.1f}s (stop {s['stop_s']:.1f}s, serving after {s['serving_s']:.1f}s, boot {s['boot_s']:.1f}s; {s['held']} held)" for s in swaps))
    if out := os.environ.get("C3_GATEWAY_SWAP_OUT"):
        Path(out).write_text(json.dumps({"rounds": rounds, "requests": len(answers), "pod_mib": pod_mib, "budget_mib": 2 * pod_mib,
                                         "peak_mib": peaks, "swaps": swaps, "negative_control_killed": killed}, indent=1))
    assert ooms == [], ooms  # 0 OOM kills
    assert failed == [], failed  # 0 failed requests
    assert [pod for _, pod in answers] == [pod for wave in waves for pod, _ in wave]
    # Every start is the predicted one, with the predicted stops — no extra swap (0 thrash) — and each plan logged.
    assert control.starts == [pod for pod, _ in expected]
    assert control.stops == [p for _, stop in expected for p in stop]
    assert [(s["pod"], s["stopped"]) for s in swaps] == [(pod, stop) for pod, stop in expected if stop]
    assert [(pod, stop) for pod, stop, _ in planned] == [(pod, stop) for pod, stop in expected if stop]
    assert all(s["ok"] and s["gpus"] == [0] for s in swaps) and all(r >= MIN_RESIDENCY_S for r in resident)
    # The fit-check's footprint holds what each engine really used, and the budget is real: three would not fit.
    assert set(peaks) == set(GPUS) and all(peak <= pod_mib for peak in peaks.values()), (peaks, pod_mib)
    assert 3 * min(peaks.values()) > 2 * pod_mib, (peaks, pod_mib)
