"""The network guard (tests/plugins/netguard.py): outside addresses never reach the kernel, in this process or a child.

Every connect to an outside address here is made only after checking that the guard is active in the
process making it, so a missing guard fails the test instead of sending a packet. 203.0.113.0/24 is
TEST-NET-3; the records go to this test's own folder, so the session's list stays empty.
"""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.plugins import netguard
from tests.plugins import netguard_socket as guard

OUTSIDE = "203.0.113.5"
DOWN = "198.51.100.7"
CHILD = textwrap.dedent("""\
    import errno, socket, sys
    if not getattr(socket.socket.connect, "_c3_netguard", False):
        sys.exit("the guard is not active in this child")
    for host in sys.argv[1:]:
        try:
            socket.socket().connect((host, 9))
        except OSError as exc:
            print(host, errno.errorcode[exc.errno])
""")


@pytest.fixture
def own_records(tmp_path, monkeypatch) -> Path:
    """Refusals in this test (and its children) are recorded in its own folder, not the session's."""
    assert guard.active(), "the network guard is not installed in the test process"
    monkeypatch.setenv(guard.ENV, str(tmp_path))
    return tmp_path


def test_outside_connect_is_refused_and_recorded(own_records):
    with socket.socket() as sock, pytest.raises(OSError) as caught:
        sock.connect((OUTSIDE, 9))
    assert caught.value.errno == errno.EHOSTUNREACH and caught.value.strerror == "No route to host"
    with socket.socket() as sock:
        assert sock.connect_ex((OUTSIDE, 9)) == errno.EHOSTUNREACH
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock, pytest.raises(OSError, match="No route to host"):
        sock.sendto(b"x", (OUTSIDE, 9))
    found = netguard.records(own_records)
    assert [(r["address"], r["via"]) for r in found] == [(OUTSIDE, "connect"), (OUTSIDE, "connect_ex"), (OUTSIDE, "sendto")]
    assert all(str(r["test"]).startswith("tests/infra/test_netguard.py::test_outside_connect_is_refused_and_recorded") for r in found)


def test_black_hole_is_refused_silently_and_loopback_allowed(own_records):
    with socket.socket() as sock, pytest.raises(OSError) as caught:
        sock.connect((DOWN, 9))
    assert caught.value.errno == errno.EHOSTUNREACH
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname(), timeout=5):
            pass
    assert netguard.records(own_records) == []


def test_child_python_process_is_guarded(own_records):
    assert netguard.pth_installed(), "no c3_test_netguard.pth in the test venv: run the tests through scripts/test.py"
    done = subprocess.run([sys.executable, "-c", CHILD, OUTSIDE, DOWN], capture_output=True, text=True, timeout=60, env=os.environ)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == [f"{OUTSIDE} EHOSTUNREACH", f"{DOWN} EHOSTUNREACH"]
    assert [(r["address"], r["pid"] != os.getpid()) for r in netguard.records(own_records)] == [(OUTSIDE, True)]


def test_session_fails_listing_what_was_refused(tmp_path):
    """A pytest session of its own (no C3_TEST_NETGUARD inherited, so it owns the records) fails and names the test."""
    (tmp_path / "test_leaky.py").write_text(textwrap.dedent(f"""\
        import socket
        from tests.plugins import netguard_socket

        def test_leaky():
            assert netguard_socket.active()  # never connect unguarded
            try:
                socket.socket().connect(({OUTSIDE!r}, 9))
            except OSError:
                pass
    """))
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in (guard.ENV, "PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER")}
    env["PYTHONPATH"] = str(root)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.plugins.netguard", "-p", "no:cacheprovider", "-q",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_leaky.py")],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert f"test_leaky.py::test_leaky (call): {OUTSIDE} port 9 (connect)" in done.stdout
