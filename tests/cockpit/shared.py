"""Worlds shared by the read-only cockpit tests, one scenario at a time, with a verified reset.

Building a world (`tests.cockpit.world`) boots stub engines, registers nodes and, for `cluster`, starts
a real `c3 pool serve`: seconds to tens of seconds on a loaded 2-core box, while a test that only looks
(navigation, help, filters, rendering, a gate opened and cancelled) needs a fraction of that. Such tests
take `shared_world` instead of `demo_world`: the session keeps the world of the last scenario asked for
(the worlds bind the fixed ports the pictures show, so only one is alive at a time) and hands it to the
next test of that scenario.

Sharing is safe only if no test changes what the next one sees, so it is checked, not assumed: after
each test the facades it opened are closed and the world's fingerprint (`Fingerprint`: every file of its
configuration, each workload's state and pids, the GPU registrations, the router's process and each
backend's drain flag, the world's own bookkeeping) is compared with the one taken when the world was
built. A test that changed it fails by name (an error at its teardown, saying what changed), and the
world is stopped, so the next test gets a fresh one. A test that writes uses `demo_world`, its own world.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from tests.cockpit import world as worlds
from tests.cockpit.world import World


class Fingerprint(BaseModel):
    """What a test could change about a world that another test would see; cheap to read (no probe of
    the GPUs, one admin request to the router)."""

    model_config = ConfigDict(frozen=True)

    config: tuple[tuple[str, str], ...]
    """Every file under the world's `$C3_HOME` (estate, node registry, profiles, recipes, catalog) with
    the SHA-256 of its bytes, empty lock files aside: any write through the facade or the backend lands here."""
    workloads: tuple[tuple[str, str, tuple[int, ...]], ...]
    """Each simulated pod's workload: name, status, pids (a stopped, killed or rebooted pod differs)."""
    registrations: tuple[str, ...]
    """The GPU registry's files (one per process holding a GPU: a stranger or a newcomer shows here)."""
    router: tuple[bool, tuple[tuple[str, bool], ...]] | None
    """For a world with a router: whether its process still runs, and each backend's drain flag."""
    bookkeeping: tuple[tuple[tuple[int, int], ...], int, tuple[tuple[str, str], ...]]
    """The world's own records: pid aliases, strangers started, environment."""

    def differences(self, other: Fingerprint) -> list[str]:
        """Which parts differ, said in words (for the failing test's message)."""
        out = []
        for name in type(self).model_fields:
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine != theirs:
                if name == "config":
                    a, b = dict(mine), dict(theirs)
                    changed = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
                    out.append("files under $C3_HOME: " + ", ".join(changed))
                else:
                    out.append(f"{name}: {mine!r} → {theirs!r}")
        return out


def _files(root: Path) -> tuple[tuple[str, str], ...]:
    """Each file under `root` with its digest; empty `.lock` files are left out (a read may create the
    file it takes a lock on; it holds no state)."""
    if not root.is_dir():
        return ()
    found = (p for p in root.rglob("*") if p.is_file() and not (p.name.endswith(".lock") and p.stat().st_size == 0))
    return tuple(sorted((str(p.relative_to(root)), hashlib.sha256(p.read_bytes()).hexdigest()) for p in found))


def fingerprint(world: World) -> Fingerprint:
    """The world's fingerprint, read inside its environment."""
    from backend import paths
    from backend.gpu.registry import default_registry_dir
    from backend.sim.runtime import SimRuntime

    with world.active():
        config = _files(paths.config_home())
        workloads = tuple(sorted((name, w.status, tuple(sorted(w.pids))) for name, w in SimRuntime().workloads().items()))
        registry = default_registry_dir()
        registrations = tuple(sorted(p.name for p in registry.iterdir())) if registry.is_dir() else ()
        router = None
        if world.router is not None:
            from backend.pool.status import read_pools

            pools = read_pools(timeout_s=5.0)
            drains = tuple(sorted((b.node, b.draining) for pool in pools for b in pool.backends))
            router = (world.router.poll() is None, drains)
    bookkeeping = (tuple(sorted(world.pids.items())), len(world.strangers), tuple(sorted(world.env.items())))
    return Fingerprint(config=config, workloads=workloads, registrations=registrations, router=router, bookkeeping=bookkeeping)


class SharedWorlds:
    """The session's shared world: at most one, of the scenario last asked for, with its fingerprint."""

    def __init__(self) -> None:
        self.world: World | None = None
        self.baseline: Fingerprint | None = None
        self.builds = 0
        """How many worlds this keeper built (a test can tell a shared world from a rebuilt one)."""

    def get(self, scenario: str) -> World:
        if self.world is None or self.world.scenario != scenario:
            self.close()
            world = World.build(scenario)  # evicts nothing of ours: closed above
            self.builds += 1
            try:
                self.baseline = fingerprint(world)
            except BaseException:
                world.stop()
                raise
            self.world = world
        return self.world

    @contextmanager
    def lent(self, scenario: str) -> Iterator[World]:
        """The world for one test, its environment set; afterwards the facades the test opened are
        closed and the world is checked. Raises `WorldChanged` (after stopping the world) if the test
        changed it."""
        world = self.get(scenario)
        opened = len(world.facades)
        with world.active():
            yield world
        for facade in world.facades[opened:]:
            facade.close()  # its live hub's threads: the next test opens its own
        del world.facades[opened:]
        if self.world is not world:
            return  # the test built a world of its own, which stopped this one (the ports): nothing left to share
        assert self.baseline is not None
        now = fingerprint(world)
        if now != self.baseline:
            changes = self.baseline.differences(now)
            self.close()
            raise WorldChanged(scenario, changes)

    def close(self) -> None:
        if self.world is not None:
            world, self.world, self.baseline = self.world, None, None
            world.stop()


class WorldChanged(Exception):
    """A test changed the shared world it was lent."""

    def __init__(self, scenario: str, changes: list[str]) -> None:
        super().__init__(f"changed the shared `{scenario}` world ({'; '.join(changes)}): a test that writes must use `demo_world`, a world of its own")


KEEPER = SharedWorlds()
"""One per process (an xdist worker is a process): the worlds' fixed ports are per machine anyway."""
worlds.before_build.append(KEEPER.close)  # any other world (a test's own, the snapshots') needs the ports
