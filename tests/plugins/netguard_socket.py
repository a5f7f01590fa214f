"""The test suite's network guard: no test sends a packet to an address outside this machine.

Allowed: loopback (127.0.0.0/8, ::1, the unspecified address, which Linux connects locally), the rig's
test hosts in network namespaces (10.213.0.0/16, fdc3:213::/32, see scripts/rig/hosts.py) and every
non-IP family (AF_UNIX, netlink…). Anything else never reaches the kernel: `connect`, `connect_ex`,
`sendto` and `sendmsg` of `socket.socket` (asyncio's selector loop, asyncssh, httpx and http.client all
end in them), and uvloop's `create_connection` / `sock_connect` (libuv connects in C, past
`socket.socket`), fail with `OSError(EHOSTUNREACH, "No route to host")`, what a powered-off host on
the LAN answers. TEST-NET-2 (198.51.100.0/24) is the designated black hole, refused silently: tests use
it on purpose for "a node that is down". Every other outside address is also recorded, one JSON line
per refusal in `$C3_TEST_NETGUARD/<pid>.jsonl` (the test from `PYTEST_CURRENT_TEST`), and the pytest
session that made the folder fails listing them (tests/plugins/netguard.py).

Standard library only: child Python processes load this file at start-up through the test venv's
`c3_test_netguard.pth` (scripts/test.py writes it) when `C3_TEST_NETGUARD` is set, so it must stay
cheap to import. Not covered: DNS (`getaddrinfo` resolves names in /etc/hosts locally; a name is
checked by what it resolves to when it is connected to), processes that are not Python (ssh, curl,
engines) and children started with an environment without `C3_TEST_NETGUARD`.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import socket
import sys
from typing import Any

ENV = "C3_TEST_NETGUARD"
"""The records folder; set for the session by the plugin, inherited by the processes the tests start."""
ALLOWED = tuple(ipaddress.ip_network(net) for net in ("127.0.0.0/8", "::1/128", "10.213.0.0/16", "fdc3:213::/32"))
BLACK_HOLE = ipaddress.ip_network("198.51.100.0/24")
"""TEST-NET-2: refused like the rest, never recorded (a test's "node that is down")."""
MARK = "_c3_netguard"
"""Set on the wrappers, so a second install (the .pth, then the plugin in the same process) is a no-op."""
_IP_FAMILIES = (socket.AF_INET, socket.AF_INET6)


def _outside(host: str) -> str | None:
    """The address `host` stands for when it is outside the allowed set (the first such one), else None."""
    try:
        candidates = [ipaddress.ip_address(host.split("%", 1)[0])]
    except ValueError:
        if host in ("", "<broadcast>"):
            return None if host == "" else "255.255.255.255"
        try:  # a name: checked by what it resolves to (locally, /etc/hosts; DNS itself is not guarded)
            infos = socket.getaddrinfo(host, None)
        except OSError:
            return None  # the real call fails the same way without sending anything
        candidates = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    for address in candidates:
        mapped = getattr(address, "ipv4_mapped", None)
        checked = mapped or address
        if checked.is_unspecified or any(checked in net for net in ALLOWED if net.version == checked.version):
            continue
        return str(checked)
    return None


def refusal(host: Any, port: Any, via: str) -> OSError | None:
    """The error to raise instead of reaching `host`, or None when it may be reached (recording it if it must)."""
    if not isinstance(host, str):
        return None
    address = _outside(host)
    if address is None:
        return None
    if ipaddress.ip_address(address) not in BLACK_HOLE:
        _record(host, address, port, via)
    return OSError(errno.EHOSTUNREACH, "No route to host")


def _record(host: str, address: str, port: Any, via: str) -> None:
    folder = os.environ.get(ENV) or _state["folder"]
    if not folder:
        return
    test = os.environ.get("PYTEST_CURRENT_TEST", "(outside a test)")
    line = json.dumps({"test": test, "host": host, "address": address, "port": port, "via": via, "pid": os.getpid()})
    try:
        with open(os.path.join(folder, f"{os.getpid()}.jsonl"), "a", encoding="utf-8") as out:
            out.write(line + "\n")
    except OSError:
        pass  # the folder went with its session; the refusal itself still stands


_state: dict[str, str] = {"folder": ""}


def _check(sock: socket.socket, address: Any, via: str) -> OSError | None:
    if sock.family not in _IP_FAMILIES or not isinstance(address, tuple) or len(address) < 2:
        return None
    return refusal(address[0], address[1], via)


def _wrap_socket() -> None:
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    real_sendto, real_sendmsg = socket.socket.sendto, socket.socket.sendmsg

    def connect(self: socket.socket, address: Any) -> None:
        error = _check(self, address, "connect")
        if error is not None:
            raise error
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        error = _check(self, address, "connect_ex")
        return error.errno if error is not None else real_connect_ex(self, address)

    def sendto(self: socket.socket, data: Any, *args: Any) -> int:
        error = _check(self, args[-1] if args else None, "sendto")
        if error is not None:
            raise error
        return real_sendto(self, data, *args)

    def sendmsg(self: socket.socket, buffers: Any, *args: Any) -> int:
        error = _check(self, args[2] if len(args) > 2 else None, "sendmsg")
        if error is not None:
            raise error
        return real_sendmsg(self, buffers, *args)

    for name, wrapper in (("connect", connect), ("connect_ex", connect_ex), ("sendto", sendto), ("sendmsg", sendmsg)):
        setattr(wrapper, MARK, True)
        setattr(socket.socket, name, wrapper)


def _wrap_uvloop(uvloop: Any) -> None:
    loop_class: Any = uvloop.Loop  # a Python subclass of the Cython loop, so its methods can be replaced
    real_create_connection, real_sock_connect = loop_class.create_connection, loop_class.sock_connect

    async def create_connection(self: Any, protocol_factory: Any, host: Any = None, port: Any = None, **kwargs: Any) -> Any:
        error = refusal(host, port, "uvloop.create_connection")
        if error is not None:
            raise error
        return await real_create_connection(self, protocol_factory, host, port, **kwargs)

    async def sock_connect(self: Any, sock: socket.socket, address: Any) -> None:
        error = _check(sock, address, "uvloop.sock_connect")
        if error is not None:
            raise error
        return await real_sock_connect(self, sock, address)

    loop_class.create_connection, loop_class.sock_connect = create_connection, sock_connect


class _UvloopHook:
    """Wraps uvloop's loop right after its first import: importing it eagerly would cost every child ~90 ms."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "uvloop":
            return None
        import importlib.util

        sys.meta_path.remove(self)  # the real finders find the real module, once
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            real_exec(module)
            _wrap_uvloop(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def active() -> bool:
    """Is the guard installed in this process?"""
    return bool(getattr(socket.socket.connect, MARK, False))


def install(folder: str = "") -> None:
    """Guard this process (once); refusals are recorded under `folder` when `$C3_TEST_NETGUARD` is unset."""
    if folder:
        _state["folder"] = folder
    if active():
        return
    _state["folder"] = folder or os.environ.get(ENV, "")
    _wrap_socket()
    if "uvloop" in sys.modules:
        _wrap_uvloop(sys.modules["uvloop"])
    else:
        sys.meta_path.insert(0, _UvloopHook())


if __name__ == "c3_test_netguard_pth" and os.environ.get(ENV):  # loaded by the test venv's .pth in a child process
    install()
