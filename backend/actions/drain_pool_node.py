"""Take a node out of (or back into) a running pool router's new sessions (`c3 pool drain|undrain`)
through the router's own admin endpoint."""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from typing import Any, ClassVar

from backend.actions.base import Action, Outcome, Plan, Problem, ProgressSink, problems_of
from backend.actions.inputs import PoolRouter
from backend.actions.registry import register
from backend.errors import C3Error, EnvironmentProblem, Refused, UsageError
from backend.models.names import host_url

NO_ROUTER_HINT = "start one: c3 pool serve --nodes a,b --bind :8011"


@dataclass(frozen=True)
class Router:
    """A running router as its status file (or the port asked for) names it."""

    admin_url: str
    bind: str
    """`HOST:PORT` it listens on."""


@dataclass(frozen=True)
class DrainAnswer:
    """What the router said about the node (`node`, `state`, `in_flight`, `pins`, …), and which pool."""

    pool: str
    answer: dict[str, Any]


def find_router(host: str | None, port: int | None) -> Router:
    """The router started with `--bind HOST:PORT` / listening on `port`, or the only one running.

    With a port but no status file for it (another C3_STATE, a router started elsewhere on this
    machine), that port on `host` (loopback when no host is given) is asked directly."""
    from backend.pool.status import admin_host, running_routers

    routers = running_routers()
    if port is not None:
        for doc in routers:
            if str(doc.get("bind", "")).rsplit(":", 1)[-1] == str(port):
                return Router(str(doc.get("admin_url")), str(doc.get("bind")))
        try:
            url = host_url(admin_host(host) if host is not None else "127.0.0.1", port)
        except ValueError as error:
            raise UsageError(f"--bind: {error}", hint="give the router's address, e.g. --bind 127.0.0.1:8011 or --bind [::1]:8011") from None
        return Router(url, url.removeprefix("http://"))
    if not routers:
        raise Refused("no pool router is running", hint=NO_ROUTER_HINT)
    if len(routers) > 1:
        binds = ", ".join(str(d.get("bind")) for d in routers)
        raise UsageError(f"{len(routers)} pool routers are running ({binds}); say which with --port", hint="e.g. c3 pool drain NODE --port 8011")
    return Router(str(routers[0].get("admin_url")), str(routers[0].get("bind")))


def post_admin(admin_url: str, path: str, node: str) -> dict[str, Any]:
    """POST `<admin_url>/c3/<path>?node=NODE` and return the router's JSON object."""
    from backend.http_probe import probe
    from backend.pool.status import admin_token

    url = f"{admin_url.rstrip('/')}/c3/{path}?node={urllib.parse.quote(node)}"
    # Our own router's admin URL, from its status file; the token is never printed.
    answer = probe(url, method="POST", timeout=5, api_key=admin_token())
    if not answer.answered:
        raise EnvironmentProblem(f"the router at {admin_url} does not answer: {answer.error}", hint="is it running? see c3 pool status")
    try:
        doc = json.loads(answer.body.decode("utf-8"))
    except ValueError:
        doc = None
    if not answer.ok:
        try:
            message = doc["error"]["message"]
        except (KeyError, TypeError):
            message = f"HTTP {answer.status}"
        raise Refused(f"the router refused: {message}")
    if not isinstance(doc, dict):
        raise EnvironmentProblem(f"the router at {admin_url} sent an answer that is not a JSON object")
    return doc


@register
@dataclass
class DrainPoolNode(Action):
    """New sessions and unkeyed requests stop going to the node; its pinned sessions move once idle."""

    key = "pool_drain"
    doing = "drain {target}"
    path: ClassVar[str] = "drain"
    """The router's admin endpoint (`/c3/<path>`)."""
    node: str
    host: str | None = None
    """The router's `--bind` host, when the user named it."""
    port: int | None = None
    """The router's port (None: the only router running)."""

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> DrainPoolNode:
        if isinstance(request, PoolRouter):  # the cockpit's key, on a pool row it shows
            return cls(target or "", host=request.host, port=request.port)
        return cls(target or "", **(request or {}))

    @property
    def target(self) -> str | None:
        return self.node

    def plan(self) -> Plan:
        try:
            router = find_router(self.host, self.port)
        except C3Error as error:
            return Plan(f"{self.path.title()} {self.node}", (f"{self.path} {self.node}: {error.message}",))
        return Plan(f"{self.path.title()} {self.node}", (f"POST {router.admin_url}/c3/{self.path}?node={self.node} (pool {router.bind})",))

    def problems(self) -> list[Problem]:
        found = problems_of(lambda: find_router(self.host, self.port))
        return found if found or self.path != "drain" else self._last_backend()

    def _last_backend(self) -> list[Problem]:
        """A warning when no other backend of the pool takes new requests (routable, not draining): the
        router then answers new sessions and unkeyed requests 503 until one is up or undrained."""
        from backend.pool.status import fetch_status

        router = find_router(self.host, self.port)
        try:
            backends = fetch_status(router.admin_url).get("backends") or []
        except (OSError, ValueError):
            return []  # the drain itself says that the router does not answer
        rows = [b for b in backends if isinstance(b, dict)]
        if not any(b.get("node") == self.node for b in rows):
            return []  # not in this pool: the router refuses it
        if any(b.get("node") != self.node and b.get("healthy") and not b.get("draining") for b in rows):
            return []
        return [Problem(
            f"draining {self.node} leaves pool {router.bind} no backend that takes new requests: new sessions and "
            "unkeyed requests get 503 until a backend is up or undrained",
            "warning", hint=f"bring another backend up first, or undrain {self.node} afterwards",
        )]

    def run(self, progress: ProgressSink) -> Outcome:
        router = find_router(self.host, self.port)
        doc = post_admin(router.admin_url, self.path, self.node)
        return Outcome(True, f"{self.path} {doc.get('node', self.node)} in pool {router.bind}", data=DrainAnswer(router.bind, doc))


@register
@dataclass
class UndrainPoolNode(DrainPoolNode):
    """The node takes new sessions again (sessions that moved away stay where they are)."""

    key = "pool_undrain"
    doing = "undrain {target}"
    path = "undrain"
