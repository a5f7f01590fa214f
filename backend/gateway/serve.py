"""Running a gateway in the foreground (`c3 gateway serve`): listen, keep the status file current,
stop idle pods it started; SIGTERM/SIGINT stop it (pods keep running: stopping the gateway is not
stopping the estate)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable

from backend.errors import EnvironmentProblem
from backend.gateway import status as status_mod
from backend.gateway.config import GatewayConfig, PodControl
from backend.gateway.front import Gateway

log = logging.getLogger("c3.gateway")

STATUS_EVERY_S = 2.0


def _setup_logging() -> None:
    root = logging.getLogger("c3.gateway")
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s c3-gateway %(levelname)s %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        root.propagate = False


def _tick(config: GatewayConfig) -> float:
    return max(0.05, min(1.0, config.idle_ttl_s / 4)) if config.idle_ttl_s > 0 else 1.0


async def _housekeeping(gw: Gateway) -> None:
    """Idle stops on a tick; the status file on every change and every STATUS_EVERY_S."""
    config = gw.config
    loop = asyncio.get_running_loop()
    written = 0.0
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(gw.slots.changed.wait(), _tick(config))
        await gw.slots.reap_idle()
        if config.state_dir is not None and (gw.slots.changed.is_set() or loop.time() - written >= STATUS_EVERY_S):
            gw.slots.changed.clear()
            snap = status_mod.snapshot(list(gw.slots.slots.values()), f"{config.host}:{gw.port}", config.idle_ttl_s, gw.auth_required,
                                       config.min_residency_s, gw.slots.last_swap, config.swap_wait_s)
            try:
                await asyncio.to_thread(status_mod.write_status, config.state_dir, gw.port, snap)
            except OSError as exc:
                log.warning("cannot write the status file: %s", exc.strerror or exc)
            written = loop.time()
        else:
            gw.slots.changed.clear()


async def serve(config: GatewayConfig, control: PodControl, on_ready: Callable[[Gateway], None] | None = None,
                stop: asyncio.Event | None = None) -> None:
    """Run until `stop` is set or a SIGTERM/SIGINT arrives."""
    gw = Gateway(config, control)
    try:
        await gw.start()
    except OSError as exc:
        raise EnvironmentProblem(f"cannot listen on {config.host}:{config.port}: {exc.strerror or exc}",
                                 hint="pick another --bind port, or stop what is using it") from exc
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    keeper = loop.create_task(_housekeeping(gw))
    log.info("listening on %s:%d for %d pods (idle ttl %s)%s", config.host, gw.port, len(gw.slots.slots),
             f"{config.idle_ttl_s:g}s" if config.idle_ttl_s else "off", ", API key required" if gw.auth_required else "")
    if on_ready is not None:
        on_ready(gw)
    try:
        await stop.wait()
    finally:
        keeper.cancel()
        await gw.close()
        for sig in installed:
            loop.remove_signal_handler(sig)
        if config.state_dir is not None:
            status_mod.remove_status(config.state_dir, gw.port)
        log.info("stopped")


def run_gateway(config: GatewayConfig, control: PodControl) -> None:
    """Blocking entry point for the CLI (plain asyncio: the gateway's cost is the engines', not its own)."""
    _setup_logging()
    asyncio.run(serve(config, control))
