"""Running a router in the foreground: `c3 pool serve` and the systemd unit both end up here.

SIGTERM or SIGINT: stop accepting, let requests in progress finish (up to `drain_timeout_s`), save pins,
remove the status file, return (the CLI exits 0). A second signal skips the rest of the drain.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys
from collections.abc import Callable

from backend.errors import EnvironmentProblem, Refused
from backend.pool import status as status_mod
from backend.pool.keys import load_or_create_salt
from backend.pool.proxy import PoolServer
from backend.pool.router import PoolConfig, Router

log = logging.getLogger("c3.pool")

GC_YOUNG = 20_000
"""Surviving allocations between young-generation collection passes (CPython's default: 700)."""


def _setup_logging() -> None:
    root = logging.getLogger("c3.pool")
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s c3-pool %(levelname)s %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        root.propagate = False


async def serve(config: PoolConfig, on_ready: Callable[[PoolServer], None] | None = None, stop: asyncio.Event | None = None) -> None:
    """Run until `stop` is set or a SIGTERM/SIGINT arrives; then drain and return."""
    salt = load_or_create_salt(config.state_dir / "salt") if config.state_dir else None
    try:
        router = Router(config, salt=salt)
        if config.state_dir:  # what drain/undrain must present; the same file as `status.admin_token_file()`
            router.admin_token = load_or_create_salt(config.state_dir / "admin-token").hex()
    except ValueError as exc:
        raise Refused(str(exc), hint="fix the node's URL with `c3 node add` (http(s)://host:port)") from None
    server = PoolServer(router)
    try:
        await server.start()
    except OSError as exc:
        await router.stop()
        raise EnvironmentProblem(
            f"cannot listen on {config.host}:{config.port}: {exc.strerror or exc}",
            hint="pick another --bind port, or stop what is using it",
        ) from exc
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        if signals > 1:
            server.force = True
            server._idle.set()  # noqa: SLF001 - wake the drain loop
        stop.set()

    installed = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, on_signal)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    if config.state_dir is not None:
        status_mod.write_status_file(server.port, config.host, [n for n, _ in config.backends], str(router.mode))
    states = ", ".join(f"{b.name}={b.health.state}" for b in router.order)
    log.info("listening on %s:%d, sticky=%s, route=%s, backends: %s", config.host, server.port, router.mode, config.route, states)
    gc.freeze()  # startup objects never need collecting; keeps GC passes short under load
    # CPython's default young-generation pass (every 700 surviving allocations) mostly scans the
    # in-flight requests' objects, which are alive, so it promotes them and scans them again a
    # generation up. A head leaves no cycle any more (`heads._feed`), so a pass finds little: run them
    # rarely; at most GC_YOUNG objects of cyclic garbage (a few MiB) wait for one.
    gc.set_threshold(GC_YOUNG, 20, 20)
    if on_ready is not None:
        on_ready(server)
    try:
        await stop.wait()
        log.info("draining (up to %gs)", config.drain_timeout_s)
        await server.shutdown(timeout_s=0.0 if signals > 1 else config.drain_timeout_s)
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        if config.state_dir is not None:
            status_mod.remove_status_file(server.port)
    log.info("stopped")


def event_loop_kind() -> str:
    """`uvloop` (a dependency, the default) or `asyncio` when `C3_POOL_LOOP=asyncio` or uvloop is missing.

    Measured independently for issue #10: uvloop took the router from ~8.5k to ~12k req/s on one core
    (~29 % less CPU per request); bench/RESULTS.md has this repo's own figures.
    """
    from backend.settings import current

    if current().pool_loop == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401 - a dependency on Linux/macOS; absent elsewhere
    except ImportError:
        return "asyncio"
    return "uvloop"


def run_pool(config: PoolConfig) -> None:
    """Blocking entry point for the CLI."""
    _setup_logging()
    kind = event_loop_kind()
    log.info("event loop: %s", kind)
    if kind == "uvloop":
        import uvloop

        uvloop.run(serve(config))
    else:
        asyncio.run(serve(config))
