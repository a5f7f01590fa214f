"""Fixed scenes of the cockpit: the real facade over the simulated world `c3 demo` runs (see
`tests.cockpit.world`), a fixed clock, no poll timers.

One list serves `scripts/screenshots.py` (SVGs for the README) and the snapshot tests, so the
pictures in the README are exactly the screens the tests pin — and what `c3 demo` shows.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from c3.app import C3App
from tests.cockpit.world import StableFacade, World

Step = Callable[..., Awaitable[None]]


async def settle(pilot, rounds: int = 3) -> None:
    """Let workers finish and their replies render."""
    for _ in range(rounds):
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def wait_until(pilot, predicate: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    """Poll between frames until `predicate()` holds; fail after `timeout` seconds (a scene that never
    got where it was going must not be pinned as if it had)."""
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() >= deadline:
            raise TimeoutError(f"scene step never reached: {what or getattr(predicate, '__doc__', None) or predicate}")
        await pilot.pause(0.05)


def press(*keys: str) -> Step:
    async def step(pilot) -> None:
        for key in keys:
            await pilot.press(key)
            await settle(pilot)

    return step


def typed(text: str) -> Step:
    async def step(pilot) -> None:
        await pilot.press(*text)
        await settle(pilot)

    return step


async def fit_ready(pilot) -> None:
    """The new-pod modal has computed its verdicts and its breakdown."""
    screen = pilot.app.screen
    await wait_until(pilot, lambda: screen.settled and "KV" in str(screen.query_one("#fit").render()), what="the new-pod form settled with a fit breakdown")
    await settle(pilot)


def focus_pod(name: str) -> Step:
    async def step(pilot) -> None:
        orch = pilot.app._orchestration()
        pods = orch.query_one("#pods")
        pods.focus()
        pods.highlighted = [p.name for p in orch.pods].index(name)
        await settle(pilot)

    return step


async def gpus_fail(pilot) -> None:
    """The rig's GPU probe stops answering; wait until the live hub has marked its source stale."""
    real = pilot.app.services.real
    real.ctx.probe.failing = True
    await wait_until(pilot, lambda: bool((status := real.live._live().latest().source("gpus")) and status.stale))


def highlight(table_id: str, row: int | str) -> Step:
    """Put the cursor on a row, by index or by row key (a recipe id stays put when the list grows)."""

    async def step(pilot) -> None:
        table = pilot.app.screen.query_one(f"#{table_id}")
        table.focus()
        table.move_cursor(row=table.get_row_index(row) if isinstance(row, str) else row)
        await settle(pilot)

    return step


async def nodes_picked(pilot) -> None:
    """The launch modal has read the registry."""
    await wait_until(pilot, lambda: getattr(pilot.app.screen, "nodes", None) is not None)
    await settle(pilot)


def overrides(text: str) -> Step:
    """Type `key=value` entries into the launch modal's overrides field and wait for the verdict."""

    async def step(pilot) -> None:
        modal = pilot.app.screen
        modal.query_one("#launch-overrides").focus()
        await pilot.press(*text)
        await wait_until(pilot, lambda: getattr(modal, "checked_for", None) == tuple(text.split()))
        await settle(pilot)

    return step


PROMPT = " ".join(["the operator watches the serving box"] * 8)
"""A prompt long enough for whole prefix-cache blocks; repeated, so the second request hits the cache."""


async def caches_read(pilot) -> None:
    """The Nodes screen's model-cache read (a worker) has landed, so the side pane shows it, not "reading"."""
    from c3.screens.nodes import NodesScreen

    def landed() -> bool:
        screen = pilot.app.screen
        return isinstance(screen, NodesScreen) and (screen.caches is not None or screen.cache_error is not None)

    await wait_until(pilot, landed, what="the model caches read")
    await pilot.pause(0.2)


async def served(pilot) -> None:
    """Real requests to the world's engines (chat three times, coder once), then wait until the engines'
    /metrics show them and a scrape interval with none has passed: counters and the since-start hit
    rate are then what the picture shows, and every rate is an honest zero (nothing is being served)."""
    import asyncio

    import httpx

    svc = pilot.app.services

    def send() -> None:
        with httpx.Client(timeout=10) as client:
            for port, model, n in ((8020, "Qwen/Qwen3-8B", 3), (8024, "Qwen/Qwen3-32B-AWQ", 1)):
                for _ in range(n):
                    client.post(f"http://127.0.0.1:{port}/v1/completions", json={"model": model, "prompt": PROMPT, "max_tokens": 16}).raise_for_status()

    await asyncio.to_thread(send)

    def quiet() -> bool:
        states = {s.name: s for s in svc.pod_states()}
        return all(
            (m := states[name].metrics) is not None and m.prompt_tokens_total == tokens and m.generation_tps == 0 and m.prompt_tps == 0
            for name, tokens in (("chat", 3 * len(PROMPT.split())), ("coder", len(PROMPT.split())))
        )

    await wait_until(pilot, lambda: quiet(), timeout=40, what="the engines' metrics show the requests and a quiet interval")
    pilot.app._orchestration().poll_now()
    await settle(pilot)


async def gateway_serving(pilot) -> None:
    """A running gateway's status file (chat loaded, summarizer's requests held for a swap)."""
    pilot.app.services.world.write_gateway_status()


async def shard_degraded(pilot) -> None:
    """An mp shard over spark-1 and spark-2 whose rank 1 was killed while serving (`World.start_shard`)."""
    pilot.app.services.world.start_shard()


async def shards_read(pilot) -> None:
    """The Nodes mode's shard reading has landed."""
    from c3.screens.nodes import NodesScreen

    await wait_until(pilot, lambda: isinstance(pilot.app.screen, NodesScreen) and bool(pilot.app.screen.shards), what="the shard reading")


async def stranger(pilot) -> None:
    """Someone else's job on GPU 3 (no pod's): the process view must flag it. It starts once the pod
    view's one GPU reading has landed: that reading raced the stranger's start, so the GPU lines behind
    the modal showed its 2 GiB in some runs and not in others (the picture has the reading before it)."""
    svc = pilot.app.services
    orch = pilot.app._orchestration()
    await wait_until(pilot, lambda: bool(orch.gpus) and not orch.gpu_poller.in_flight, what="the pod view's GPU reading")
    svc.world.add_stranger(3, 2048)
    await wait_until(pilot, lambda: any(r.pod is None for r in svc.gpu_processes()), what="the stranger process is seen")


async def history_filled(pilot) -> None:
    """Every series holds the readings a history picture shows (`world.HISTORY_POINTS`)."""
    from tests.cockpit.world import HISTORY_POINTS

    real = pilot.app.services.real

    def filled() -> bool:
        view = real.history()
        pods = {s.key.split("/")[1] for s in view.series if s.key.startswith("pod/")}
        return len(pods) >= 2 and all(len(s.points) >= HISTORY_POINTS for s in view.series)

    await wait_until(pilot, filled, timeout=40)


@dataclass(frozen=True)
class Scene:
    """One picture: a world scenario (`tests.cockpit.world.SCENARIOS`), a terminal size, and the steps that lead to it."""

    name: str
    title: str
    scenario: str = "placed"
    size: tuple[int, int] = (120, 40)
    steps: tuple[Step, ...] = field(default_factory=tuple)
    readonly: bool = False
    colors16: bool = False
    """Run as under `--color 16` (the colour depth Textual reads; the SVG shows the ANSI theme's colours)."""
    ascii: bool = False
    """Run as under `--ascii`."""


SCENES: tuple[Scene, ...] = (
    Scene("orchestration-empty", "Orchestration, empty rig", "empty"),
    Scene("new-pod-80x24", "New pod at 80×24", "empty", (80, 24), steps=(press("N"), typed("duo"), press("tab"), typed("tp2"), fit_ready)),
    Scene("nodes-empty", "Nodes, none registered yet", "empty", steps=(press("2"),)),
    Scene("recipes-fresh", "Recipes on a fresh demo: the built-in recipe", "empty", steps=(press("3"),)),
    Scene("orchestration-placed", "Orchestration, two pods placed", "placed"),
    Scene("new-pod", "New pod: slug ranked by fit, live breakdown", "placed", steps=(press("N"), typed("chat2"), press("tab"), typed("gpt-oss"), fit_ready)),
    Scene("confirm-create", "Confirm gate: the exact plan, Cancel focused", "placed", steps=(press("N"), typed("chat2"), press("tab"), typed("gpt-oss"), fit_ready, press("ctrl+s"))),
    Scene("confirm-stop-all", "Stop the whole estate: what will stop", "placed", steps=(press("o"),)),
    Scene("logs", "Pod logs (bounded, following)", "placed", steps=(press("l"),)),
    Scene("logs-search", "Log search: matches highlighted, n/N to move", "placed", steps=(press("l"), press("slash"), typed("cache"), press("enter"))),
    Scene("logs-search-80x24", "Log search at 80×24, long lines wrapped", "placed", (80, 24), steps=(press("l", "w"), press("slash"), typed("cache"), press("enter"))),
    Scene("edit-pod", "e: the pod form prefilled with the pod's slug, GPUs and port", "placed", steps=(focus_pod("chat"), press("e"), fit_ready)),
    Scene("confirm-edit", "Saving an edit: the gate says what changes and that the running pod restarts", "placed",
          steps=(focus_pod("chat"), press("e"), fit_ready, press("tab", "tab", "tab", *["backspace"] * 4), typed("8044"), fit_ready, press("ctrl+s"))),
    Scene("help", "Help, generated from the bindings", "placed", steps=(press("question_mark"),)),
    Scene("nodes", "Nodes: this machine, probed without SSH", "placed", steps=(press("2"), caches_read)),
    Scene("add-node", "Add node: validated as typed", "placed", steps=(press("2", "a"), typed("spark-3"), press("tab"), typed("http://10.213.0.13:8000"), press("tab"), typed("ubuntu@"))),
    Scene("recipes", "Recipes", "placed", steps=(press("3"),)),
    Scene("readonly-refused", "Read-only: a write refused, and why", "placed", steps=(press("d"),), readonly=True),
    Scene("history", "History: GPU and engine metrics with a time axis (h; kept while modals are open)", "placed", steps=(history_filled, press("h", "w", "w"))),
    Scene("history-80x24", "History at 80×24", "placed", (80, 24), steps=(history_filled, press("h", "w", "w"))),
    # These two send requests to the world's engines: they stay last of the `placed` scenes.
    Scene("orchestration-metrics", "Engine metrics per pod: requests, KV cache, prefix-cache hits, tok/s", "placed", steps=(served,)),
    Scene("orchestration-metrics-80x24", "Engine metrics at 80×24 (the compact line)", "placed", (80, 24), steps=(served,)),
    Scene("orchestration-stale", "A stale source (GPU readings stopped)", "stale", steps=(gpus_fail, press("r"))),
    Scene("orchestration-mismatch", "A placement mismatch explained", "mismatch", steps=(focus_pod("odd"),)),
    Scene("orchestration-mismatch-80x24", "The same at 80×24", "mismatch", (80, 24)),
    Scene("details", "Pod details", "mismatch", steps=(focus_pod("odd"), press("i"))),
    Scene("colors-16", "16 colours: the terminal's own palette, red only for errors", "mismatch", steps=(focus_pod("odd"), press("i")), colors16=True),
    Scene("ascii-80x24", "ASCII only (--ascii, or a locale that is not UTF-8) at 80×24", "mismatch", (80, 24), ascii=True),
    Scene("problems", "The problems filter (!): only the pods in trouble", "mismatch", steps=(press("exclamation_mark"),)),
    Scene("problems-80x24", "The problems filter at 80×24", "mismatch", (80, 24), steps=(press("exclamation_mark"),)),
    # A stranger joins GPU 3 here and stays: these stay last of the `mismatch` scenes.
    Scene("gateway", "Gateway (g): models, the pod loaded, the last swap, requests held for a swap", "placed", (140, 40),
          steps=(gateway_serving, press("g"))),
    # The shard's rank 0 runs on in this world: this scene stays after every other `placed` scene of it.
    Scene("nodes-shard", "Nodes with a shard: rank 1 killed while serving, shown dead on its node", "placed",
          steps=(shard_degraded, press("2"), caches_read, shards_read)),
    Scene("processes", "GPU processes (p): a misplaced pod on the GPU it really uses, a foreign process", "mismatch", steps=(stranger, press("p"))),
    Scene("processes-80x24", "GPU processes at 80×24", "mismatch", (80, 24), steps=(stranger, press("p"))),
    Scene("signal-foreign", "K on a foreign process: the gate shows whose it is and confirms only with f", "mismatch",
          steps=(stranger, press("p", "slash"), typed("4321"), press("enter", "K"))),
    Scene("orchestration-8gpus", "Eight GPUs, sixteen pods", "bench"),
    Scene("filter", "Filter and sort (/, s): sixteen pods narrowed to one model, by state", "bench", steps=(press("slash"), typed("qwen3-8b[^-]"), press("enter", "s", "s"))),
    Scene("filter-80x24", "Filter and sort at 80×24", "bench", (80, 24), steps=(press("slash"), typed("qwen3-8b[^-]"), press("enter", "s", "s"))),
    Scene("orchestration-nodes", "Pods of every registered node under this host's: here the other node is off", "cluster"),
    Scene("nodes-pool", "Nodes with a running pool: per-backend health, load, latency", "cluster", steps=(press("2"), caches_read)),
    Scene("nodes-pool-80x24", "Nodes and pool at 80×24", "cluster", (80, 24), steps=(press("2"), caches_read)),
    Scene("recipe-launch", "Launch a recipe: nodes in rank order", "cluster", steps=(press("3"), highlight("recipes", "spark2-vllm-qwen3-235b-a22b-gptq-int4"), press("u"), nodes_picked)),
    Scene("recipe-launch-preview", "Launch preview: the dry-run in the confirm gate", "cluster", steps=(press("3"), highlight("recipes", "spark2-vllm-qwen3-235b-a22b-gptq-int4"), press("u"), nodes_picked, press("ctrl+s"))),
    Scene("recipe-launch-preview-80x24", "Launch preview at 80×24: the plan scrolls, problems and buttons stay on screen", "cluster", (80, 24), steps=(press("3"), highlight("recipes", "spark2-vllm-qwen3-235b-a22b-gptq-int4"), press("u"), nodes_picked, press("ctrl+s"))),
    Scene("recipe-launch-overrides", "Launch with overrides: checked as typed", "cluster", steps=(press("3"), highlight("recipes", "qwen3-32b-awq-2x5090"), press("u"), nodes_picked, overrides("max_model_len=8192 gpu_memory_utilization=0.85"))),
    Scene("recipe-launch-overrides-preview", "Overrides in the dry-run: recipe + local overrides", "cluster", steps=(press("3"), highlight("recipes", "qwen3-32b-awq-2x5090"), press("u"), nodes_picked, overrides("max_model_len=8192 gpu_memory_utilization=0.85"), press("ctrl+s"))),
    Scene("recipe-launch-abort", "An override known to abort: refused in the gate", "cluster", steps=(press("3"), highlight("recipes", "qwen3-32b-awq-2x5090"), press("u"), nodes_picked, overrides("max_model_len=65536"), press("ctrl+s"))),
)
"""Grouped by scenario: one world is built per group (`Worlds`)."""


class Worlds:
    """At most one world alive at a time (their pods share the fixed ports the pictures show)."""

    def __init__(self) -> None:
        self.world: World | None = None

    def get(self, scenario: str) -> World:
        if self.world is None or self.world.scenario != scenario:
            self.close()
            self.world = World.build(scenario)
        return self.world

    def close(self) -> None:
        if self.world is not None:
            self.world.stop()
            self.world = None


def measured(state: Any) -> bool:
    """Its engine metrics are in, rates included (two scrapes): the picture no longer changes."""
    return state.metrics_error is not None or (state.metrics is not None and state.metrics.generation_tps is not None)


def converged(svc: StableFacade, timeout: float = 20.0) -> None:
    """Block until the live view has caught up with the world: every running pod serving and judged."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = svc.pod_states()
        workloads = svc.ctx.runtime.workloads()
        running = {name for name, w in workloads.items() if w.running}
        if all(s.state == "serving" and s.placement != "unknown" and measured(s) for s in states if s.name in running) and all(
            s.state == "down" for s in states if s.name not in running
        ):
            return
        time.sleep(0.1)
    raise AssertionError(f"the live view did not converge: {svc.pod_states()}")


@contextmanager
def scene_app(scene: Scene, worlds: Worlds) -> Iterator[C3App]:
    """The app for a scene: the real facade over the scene's world, fixed clock, no poll timers.
    The world's environment stays set while the app runs."""
    world = worlds.get(scene.scenario)
    with world.active():
        svc = world.services(readonly=scene.readonly)
        from textual import constants

        depth = constants.COLOR_SYSTEM
        try:
            converged(svc)
            if scene.colors16:
                constants.COLOR_SYSTEM = "standard"  # type: ignore[misc]  # what `--color 16` sets before Textual loads
            yield C3App(svc, readonly=scene.readonly, clock=svc.clock, autopoll=False, ascii=scene.ascii)
        finally:
            constants.COLOR_SYSTEM = depth  # type: ignore[misc]
            svc.close()


async def play(scene: Scene, pilot) -> None:
    """Run a scene's steps on a started app."""
    await settle(pilot, rounds=4)
    for step in scene.steps:
        await step(pilot)
    await settle(pilot)
