"""Choosing a pod's host port: the club-3090 rule (slug default + 20 × pods in the file, then +1
until free), extended to skip ports something on this host already listens on."""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable, Iterable, Mapping

from backend import limits
from backend.errors import Refused
from backend.models.estate import Estate

PORT_STRIDE = 20
FIRST_UNPRIVILEGED = 1024
"""Room between pods' default ports, so a slug's neighbours (metrics, a second server) stay free."""


def host_port_bound(port: int) -> bool:
    """True when a listener already holds `port` on 127.0.0.1 or 0.0.0.0 (IPv4 TCP).

    Found by trying to bind: portable, needs no privileges for ports >= 1024, and sees listeners of
    every user and every container publishing to the host. SO_REUSEADDR keeps a port that only has
    TIME_WAIT leftovers counted as free, as a server starting now would see it.
    """
    for address in ("127.0.0.1", "0.0.0.0"):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((address, port))
            except OSError as error:
                if error.errno == errno.EADDRINUSE:
                    return True
                # EACCES (a privileged port) or EADDRNOTAVAIL: we cannot tell; not "in use".
    return False


def new_pod_port_problem(text: str, taken: Mapping[int, str], *, is_bound: Callable[[int], bool] | None = host_port_bound) -> str | None:
    """Why `text` (a port as typed) cannot be a new pod's host port, in one line: not a number 1–65535,
    another pod's (`taken`: port → pod), or (with `is_bound`) held by a listener on this host — the
    same check `default_port` skips bound ports with. None when it can be. `is_bound` binds: call it off
    any event loop; None checks the estate alone (never blocks)."""
    try:
        port = limits.port_text(text.strip())  # the rule of every port flag; the form's own shorter words
    except ValueError:
        return f"port: a number from {limits.PORT_MIN} to {limits.PORT_MAX}"
    if port in taken:
        return f"port {port} is pod {taken[port]}'s"
    if is_bound is not None and is_bound(port):
        return f"port {port} is in use on this machine"
    return None


def default_port(
    estate: Estate,
    slug_default: int,
    *,
    exclude: Iterable[int] = (),
    is_bound: Callable[[int], bool] | None = host_port_bound,
) -> int:
    """`slug_default + 20 × len(pods)`, then +1 until the port is neither in the file nor bound here.

    Past 65535 the count wraps into the unprivileged range (1024–65535), so a file with thousands
    of pods still gets a port instead of a refusal.
    """
    taken = {pod.port for pod in estate.pods} | set(exclude)
    start = _wrap(slug_default + PORT_STRIDE * len(estate.pods))
    port = start
    for _ in range(2048):  # bounded: a host with thousands of listeners in a row is not our problem
        if port not in taken and (is_bound is None or not is_bound(port)):
            return port
        port = _wrap(port + 1)
    raise Refused(f"no free port found from {start} upwards", hint="choose one with --port N")


def _wrap(port: int) -> int:
    """A port number folded into 1024–65535 once it passes 65535."""
    return port if port <= limits.PORT_MAX else FIRST_UNPRIVILEGED + (port - FIRST_UNPRIVILEGED) % (limits.PORT_MAX + 1 - FIRST_UNPRIVILEGED)
