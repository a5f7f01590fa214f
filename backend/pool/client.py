"""What the request helpers (admin.py, intake.py, exchange.py, respond.py) use of the proxy's server and of one
client connection, as Protocols.

proxy.py implements them (`PoolServer`, `ClientProtocol`) and imports the helpers; the helpers name
these instead of proxy's classes, so no helper imports proxy (not even for the type checker) and the
modules form no import cycle.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from backend.pool.deadlines import Watch
from backend.pool.router import PoolConfig, Router


class Server(Protocol):
    """The listening proxy as the helpers see it (`proxy.PoolServer`)."""

    @property
    def router(self) -> Router: ...

    @property
    def config(self) -> PoolConfig: ...

    @property
    def port(self) -> int:
        """The bound port (the configured one, or the one the OS picked for port 0)."""
        ...

    @property
    def closing(self) -> bool:
        """Shutting down: every answer closes its connection."""
        ...


class Client(Protocol):
    """One client connection as the helpers see it (`proxy.ClientProtocol`)."""

    on_lost: Callable[[], None] | None
    """Called once when the client goes (the backend transport's abort() while a request is relayed)."""
    body_deadline: float
    """While a request body is read: when its next bytes are overdue; else 0 (the reaper enforces it)."""
    body_cap: float
    """When the current request body must have arrived in all."""

    @property
    def lost(self) -> bool:
        """The client has gone (connection_lost ran)."""
        ...

    @property
    def transport(self) -> asyncio.Transport | None: ...

    @property
    def watch(self) -> Watch:
        """The response head, body bytes or client write waited on now (see `deadlines.py`)."""
        ...
