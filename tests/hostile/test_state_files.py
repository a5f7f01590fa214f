"""The state files c3 writes itself (router status, admin token and salt, watchdog state, simulator
records), read back through the bounded regular-file reader: a FIFO, a link to /dev/zero or JSON nested
absurdly deep is one clear error, or (router status files) a warning while the other routers are
listed, in bounded time and memory. And a symlink loop where the estate should be is said as such.

Each reader runs in a subprocess with the hostile helpers' deadline and address-space cap: on the old
code a FIFO hung the read and /dev/zero grew until MemoryError, which must not take the test box down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.hostile.helpers import AT_ONCE_S, _limit_memory, run

STATES = ("fifo", "device", "deep-json")


def _spoil(path: Path, state: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if state == "fifo":
        os.mkfifo(path)
    elif state == "device":
        path.symlink_to("/dev/zero")
    else:
        path.write_text("[" * 20_000 + "]" * 20_000)  # 40 KB: under the JSON caps, past any parser's recursion


def _state() -> Path:
    path = Path(os.environ["C3_STATE"])
    path.mkdir(parents=True, exist_ok=True)
    return path


def _python(code: str) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh interpreter with the test's C3_HOME/C3_STATE, a deadline and the memory cap."""
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=AT_ONCE_S, preexec_fn=_limit_memory)
    except subprocess.TimeoutExpired:
        pytest.fail(f"no answer within {AT_ONCE_S:.0f} s (a blocking read)")
    assert time.monotonic() - started < AT_ONCE_S
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    return done


# What each reader says: the one error line, or "ok" when it goes on.
READ = {
    "watchdog state": ("watchdog/p1.json", "from backend.cluster.watchdog import read_state; read_state('p1')"),
    "simulator record": ("sim/pods/chat.json", "from backend.sim.runtime import SimRuntime; SimRuntime()._record('chat')"),
    "router salt": ("pool/salt", "from backend.pool.keys import load_or_create_salt; from backend.pool.status import pool_dir; "
                                 "load_or_create_salt(pool_dir() / 'salt')"),
    "router admin token": ("pool/admin-token", "from backend.pool.status import admin_token; admin_token()"),
}


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("what", sorted(READ))
def test_a_spoiled_state_file_is_one_clear_error_at_once(what, state):
    where, call = READ[what]
    path = _state() / where
    _spoil(path, state)
    done = _python(f"""
        from backend.errors import C3Error
        try:
            {call}
        except C3Error as error:
            print("error:", error.message)
        else:
            print("ok")
    """)
    said = done.stdout.strip()
    assert said.startswith(f"error: {what} {path}"), said
    raw = what.startswith("router")  # the salt and the token are bytes: 200 KB of brackets is only too large
    assert ("FIFO" if state == "fifo" else "character device" if state == "device" else "larger than 4 KiB" if raw else "nested too deeply") in said
    if what == "watchdog state" or what == "simulator record":
        assert path.is_symlink() or path.exists()  # refused, not written through


@pytest.mark.parametrize("state", STATES)
def test_pool_status_skips_a_spoiled_status_file_and_lists_the_others(state):
    pool = _state() / "pool"
    pool.mkdir(parents=True, exist_ok=True)
    good = {"pid": os.getpid(), "bind": "127.0.0.1:9", "admin_url": "http://127.0.0.1:9", "nodes": ["a"], "sticky": "auto"}
    (pool / "router-9.json").write_text(json.dumps(good))
    _spoil(pool / "router-8011.json", state)
    result = run("pool", "status", "--json", deadline=AT_ONCE_S)
    assert not result.timed_out and result.rc == 0, (result.rc, result.err[-2000:])
    assert "Traceback" not in result.err
    pools = json.loads(result.out)["pools"]
    assert [p["bind"] for p in pools] == ["127.0.0.1:9"] and pools[0]["reachable"] is False
    warning = result.err.strip().splitlines()
    assert len(warning) == 1 and "router-8011.json" in warning[0] and warning[0].endswith("skipped"), result.err


def test_a_status_file_with_a_negative_pid_is_ignored():
    pool = _state() / "pool"
    pool.mkdir(parents=True, exist_ok=True)
    (pool / "router-9.json").write_text(json.dumps({"pid": -1, "bind": "127.0.0.1:9", "admin_url": "http://127.0.0.1:9"}))
    result = run("pool", "status", "--json", deadline=AT_ONCE_S)
    assert result.rc == 0 and json.loads(result.out)["pools"] == []  # os.kill(-1, 0) is not "alive"


def test_a_symlink_loop_where_the_estate_should_be_is_said_as_such(home):
    estate = home / "estate.yml"
    estate.symlink_to(estate)
    for argv in (("pod", "rm", "chat"), ("pod", "validate")):
        result = run(*argv, deadline=AT_ONCE_S)
        line = result.error_line()
        assert result.rc == 3 and "symbolic link loop" in line and "no estate file" not in line, (argv, line)


# Readers that go on past a spoiled file (it is skipped, or taken as no live holder): what each says then.
GO_ON = {
    "router pins file": ("pool/pins-9.json", "from pathlib import Path; from backend.pool.router import PoolConfig, Router; "
                                             "from backend.pool.status import pool_dir; "
                                             "r = Router(PoolConfig(backends=[('a', 'http://127.0.0.1:9/v1')], port=9, state_dir=pool_dir())); "
                                             "r.load_pins(); print('pins', len(r.pins))", "pins 0"),
    "demo gateway record": ("demo/gateway.json", "from backend.sim.demo import stop_gateway; print('stopped', stop_gateway())", "stopped False"),
    "demo lease": ("demo/leases/1-x.json", "from backend.sim.demo import leave_demo; print('last', leave_demo(None))", "last True"),
    "GPU registration file": ("gpu-registry/1.gpu", "from backend.stub_registry import read_registrations; from backend.paths import state_home; "
                                                    "print('found', len(read_registrations(state_home() / 'gpu-registry')))", "found 0"),
    "CDI spec file": ("cdi/nvidia.json", "from backend.runtime.gpu_mode import cdi_gpu_names; from backend.paths import state_home; "
                                         "print('names', sorted(cdi_gpu_names([state_home() / 'cdi'])))", "names []"),
}


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("what", sorted(GO_ON))
def test_a_spoiled_file_that_a_reader_skips_is_skipped_at_once(what, state):
    where, call, said = GO_ON[what]
    _spoil(_state() / where, state)
    done = _python(call)
    assert done.returncode == 0 and done.stdout.strip().splitlines()[-1] == said, (done.stdout, done.stderr[-2000:])


@pytest.mark.parametrize("state", ("fifo", "device"))
def test_a_spoiled_simulated_pod_log_or_systemd_unit_is_one_clear_error_at_once(state):
    log = _state() / "sim" / "logs" / "chat.log"
    _spoil(log, state)
    done = _python("""
        from backend.errors import C3Error
        from backend.sim.runtime import SimRuntime
        try:
            SimRuntime().logs("chat")
        except C3Error as error:
            print("error:", error.message)
    """)
    assert done.stdout.strip().startswith(f"error: simulated pod log {log} is "), done.stdout
    unit = _state() / "units" / "c3-gateway-8012.service"
    _spoil(unit, state)
    done = _python(f"""
        from pathlib import Path
        from backend.actions.install_gateway_service import InstallGatewayService
        from backend.errors import C3Error
        try:
            InstallGatewayService(bind="127.0.0.1:8012", port=8012, estate=Path("estate.yml"), unit_dir=Path({str(unit.parent)!r})).existing()
        except C3Error as error:
            print("error:", error.message)
    """)
    assert done.stdout.strip().startswith(f"error: systemd unit file {unit} is "), done.stdout


def test_a_simulated_pod_log_larger_than_memory_is_read_from_its_end():
    """A 2 GB log (sparse: no disk) under the 500 MB cap: the last lines come back, in bounded time and memory."""
    log = _state() / "sim" / "logs" / "chat.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as handle:
        handle.truncate(2 * 1024**3)
        handle.seek(0, os.SEEK_END)
        handle.write(b"".join(b"line %d\n" % n for n in range(1000)))
    done = _python("""
        from backend.sim.runtime import SimRuntime
        print(SimRuntime().logs("chat", tail=3), end="")
    """)
    assert done.returncode == 0 and done.stdout == "line 997\nline 998\nline 999\n", (done.stdout[-200:], done.stderr[-2000:])
