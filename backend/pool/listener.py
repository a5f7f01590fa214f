"""The router's listening socket and its accept loop.

Why not `loop.create_server`: at the file-descriptor limit, CPython's accept loop (3.11) retries
`accept()` up to `backlog` times per wake-up, logging a traceback and arming a retry timer each time
— measured here: ~35,000 log lines in 3 s with 80 pending connections and a limit of 40 fds. This loop
accepts one connection at a time; on EMFILE/ENFILE/ENOBUFS/ENOMEM it backs off (50 ms growing to 1 s)
and logs one line when the streak starts and one when it ends.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Callable

log = logging.getLogger("c3.pool")

OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class Listener:
    """Accepts connections on host:port and hands each to `protocol_factory`."""

    def __init__(self, host: str, port: int, protocol_factory: Callable[[], asyncio.Protocol], backlog: int = 4096) -> None:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, addr = infos[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
            sock.listen(backlog)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self.sock = sock
        self.port: int = sock.getsockname()[1]
        self.factory = protocol_factory
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._accept_loop())

    def close(self) -> None:
        """Stop accepting (connections already accepted are not touched)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self.sock.close()

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        streak = 0
        while True:
            try:
                conn, _ = await loop.sock_accept(self.sock)
            except OSError as exc:
                if exc.errno not in OUT_OF_RESOURCES:
                    if self.sock.fileno() < 0:
                        return  # closed
                    log.warning("accept failed: %s", exc.strerror or exc)
                    await asyncio.sleep(0.05)
                    continue
                if not streak:
                    log.warning("cannot accept connections: %s (raise LimitNOFILE / ulimit -n); backing off", exc.strerror or exc)
                streak += 1
                await asyncio.sleep(min(1.0, 0.05 * streak))
                continue
            if streak:
                log.warning("accepting connections again after %d refused attempts", streak)
                streak = 0
            try:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                await loop.connect_accepted_socket(self.factory, conn)
            except OSError as exc:
                conn.close()
                log.warning("dropped an accepted connection: %s", exc.strerror or exc)
