"""The node registry: `$C3_HOME/nodes.json`, mode 0600, written atomically under a lock.

A node has a name, the URL where it answers OpenAI requests (`host`) and the SSH target this
machine orchestrates it through (`ssh`). A node is `local` (driven without SSH) when its SSH target
names this machine — the endpoint URL does not count, since a node reached through a tunnel answers
on 127.0.0.1 — or when it was added with `--local`. Every name passed to `--nodes` anywhere must be registered, this machine included.
"""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from backend import paths
from backend.atomic import locked, write_atomic
from backend.errors import C3Error, Refused, UsageError, os_failure
from backend.models.names import NODE_NAME_MAX, NODE_NAME_PATTERN, check_endpoint_url, check_ssh_target
from backend.text import show
from backend.userfiles import load_json, read_text


class Node(BaseModel):
    """One machine in the registry."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True)

    name: str = Field(pattern=NODE_NAME_PATTERN, max_length=NODE_NAME_MAX)
    """Registry key, `[a-z0-9][a-z0-9_-]*`."""
    host: str
    """Base URL of the node's OpenAI-compatible endpoint, e.g. `http://10.0.0.5:8000`."""
    ssh: str
    """SSH target `USER@HOST` (or `USER@HOST:PORT`)."""
    ssh_key: str | None = None
    """Private key file for SSH, when not the agent's or the default."""
    local_override: bool = Field(default=False, alias="local")
    """`node add --local`: this machine, whatever the SSH target says (e.g. a name it is not known by)."""

    # nodes.json is checked on load with the very rules `node add` applies, so a hand edit cannot
    # smuggle in a URL that crashes `pool serve` later (port 99999, `:abc`) or one with a password.
    @field_validator("host")
    @classmethod
    def _host_is_an_endpoint(cls, value: str) -> str:
        return check_endpoint_url(value)

    @field_validator("ssh")
    @classmethod
    def _ssh_is_a_target(cls, value: str) -> str:
        return check_ssh_target(value)

    @property
    def address(self) -> str:
        """The host part of `host` (the endpoint URL)."""
        return urlparse(self.host).hostname or ""

    @property
    def ssh_user(self) -> str:
        """User part of the SSH target."""
        return self.ssh.split("@", 1)[0] if "@" in self.ssh else ""

    @property
    def ssh_host(self) -> str:
        """Host part of the SSH target (without user or port)."""
        target = self.ssh.split("@", 1)[-1]
        if target.startswith("["):  # [v6]:port
            return target[1 : target.index("]")]
        return target.rsplit(":", 1)[0] if target.count(":") == 1 else target

    @property
    def ssh_port(self) -> int:
        """Port part of the SSH target (22 by default)."""
        target = self.ssh.split("@", 1)[-1]
        if target.startswith("[") and "]:" in target:
            return int(target.rsplit(":", 1)[1])
        if target.count(":") == 1:
            return int(target.rsplit(":", 1)[1])
        return 22

    @property
    def local(self) -> bool:
        """This machine: `--local`, else the SSH target names it (the endpoint only without a target)."""
        if self.local_override:
            return True
        return is_local_address(self.ssh_host) if self.ssh else is_local_address(self.address)


class NodeRegistry(BaseModel):
    """The whole `nodes.json` file."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    """Only 1 exists."""
    nodes: list[Node] = Field(default_factory=list)
    """Registered nodes, in the order they were added."""

    @model_validator(mode="after")
    def _names_unique(self) -> NodeRegistry:
        seen: set[str] = set()
        for node in self.nodes:
            if node.name.lower() in seen:
                raise ValueError(f"node name `{node.name}` appears twice (names are unique ignoring case)")
            seen.add(node.name.lower())
        return self


@lru_cache(maxsize=1)
def local_identities() -> frozenset[str]:
    """Names and addresses that mean "this machine": hostname, FQDN, loopback and every interface address.

    Interface addresses matter because on DGX Sparks the LAN address is often not in DNS (sparkrun
    compares against `ip -o addr` for the same reason).
    """
    names = {"localhost", "127.0.0.1", "::1", socket.gethostname().lower(), socket.getfqdn().lower()}
    try:
        out = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True, timeout=5).stdout
        for match in re.finditer(r"\binet6?\s+([0-9a-fA-F:.]+)/", out):
            names.add(match.group(1).lower())
    except (OSError, subprocess.SubprocessError):
        pass
    return frozenset(names)


def is_local_address(host: str) -> bool:
    """True when `host` names this machine (loopback range included), also through a name that
    resolves to one of its addresses (a head registered by its DNS name while c3 runs on it)."""
    host = host.strip().strip("[]").lower()
    if not host:
        return False
    if host in local_identities() or host.startswith("127.") or host == "::1":
        return True
    return any(a in local_identities() or a.startswith("127.") or a == "::1" for a in resolved_addresses(host))


@lru_cache(maxsize=256)
def resolved_addresses(host: str) -> tuple[str, ...]:
    """The addresses `host` resolves to (empty for an address literal or a name that does not resolve
    within 2 s: an unknown name is not this machine)."""
    if re.fullmatch(r"[0-9.]+|[0-9a-f:]+", host):
        return ()
    from concurrent.futures import ThreadPoolExecutor
    from concurrent.futures import TimeoutError as Late

    pool = ThreadPoolExecutor(max_workers=1)
    try:
        infos = pool.submit(socket.getaddrinfo, host, None).result(timeout=2)
    except (OSError, Late, UnicodeError):
        return ()
    finally:
        pool.shutdown(wait=False)
    return tuple(sorted({str(i[4][0]).split("%", 1)[0].lower() for i in infos}))


def _validate_url(url: str) -> str:
    try:
        return check_endpoint_url(url)
    except ValueError as error:
        hint = ("put the credentials in the pool's own auth (an API key header), not in the URL" if "credentials" in str(error)
                else "e.g. --host http://10.0.0.5:8000")
        raise UsageError(f"--host {error}", hint=hint) from None


def _validate_ssh(target: str) -> str:
    try:
        return check_ssh_target(target)
    except ValueError as error:
        raise UsageError(f"--ssh {error}", hint="e.g. --ssh ubuntu@spark-2") from None


def load_registry(path: Path | None = None) -> NodeRegistry:
    """Read `nodes.json` (an empty registry when the file does not exist), checked as `node add` checks.

    A regular file of at most 1 MiB; malformed JSON, duplicate keys or names, bad URLs or SSH
    targets are one usage error naming the node and field (never echoing a credential).
    """
    path = path or paths.nodes_file()
    text = read_text(path, what="node registry", missing_ok=True)
    if text is None:
        return NodeRegistry()
    hint = "fix the file by hand (`c3 node add` shows the rules) or remove it"
    data = load_json(text, source=path, what="node registry", hint=hint)
    try:
        return NodeRegistry.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        loc = first["loc"]
        where = "top level"
        if len(loc) >= 2 and loc[0] == "nodes" and isinstance(loc[1], int):
            nodes = data.get("nodes") if isinstance(data, dict) else None
            name = nodes[loc[1]].get("name") if isinstance(nodes, list) and loc[1] < len(nodes) and isinstance(nodes[loc[1]], dict) else None
            where = f"node #{loc[1] + 1}" + (f" (`{show(name)}`)" if isinstance(name, str) else "") + "".join(f".{p}" for p in loc[2:])
        elif loc:
            where = ".".join(str(p) for p in loc)
        message = str(first["msg"]).removeprefix("Value error, ")
        raise UsageError(f"node registry {path} is not valid: {where}: {show(message, 160)}", hint=hint) from None


def _save(registry: NodeRegistry, path: Path) -> None:
    write_atomic(path, registry.model_dump_json(indent=2) + "\n", mode=0o600)


def new_node_errors(name: str, host: str, ssh: str) -> list[UsageError]:
    """Every reason `node add NAME --host HOST --ssh SSH` is refused before the registry is read
    (name, endpoint URL, SSH target), one error each: `add_node` raises the first, a form lists all."""
    errors = []
    if not re.fullmatch(NODE_NAME_PATTERN, name) or len(name) > NODE_NAME_MAX:
        errors.append(UsageError(f"node name `{name[:40]}{'…' if len(name) > 40 else ''}` must match [a-z0-9][a-z0-9_-]* "
                                 f"and have at most {NODE_NAME_MAX} characters"))
    for check, value in ((_validate_url, host), (_validate_ssh, ssh)):
        try:
            check(value)
        except UsageError as error:
            errors.append(error)
    return errors


def add_node(name: str, host: str, ssh: str, ssh_key: str | None = None, path: Path | None = None, *, local: bool = False) -> Node:
    """Register a node; refuses a name already taken (case-insensitively)."""
    path = path or paths.nodes_file()
    errors = new_node_errors(name, host, ssh)
    if errors:
        raise errors[0]
    node = Node(name=name, host=check_endpoint_url(host), ssh=ssh, ssh_key=ssh_key, local_override=local)
    with _fs_errors(path):
        with locked(path):
            registry = load_registry(path)
            if any(n.name.lower() == name.lower() for n in registry.nodes):
                raise Refused(f"node `{name}` is already registered", hint=f"`c3 node rm {name}` first")
            registry.nodes.append(node)
            _save(registry, path)
    return node


@contextlib.contextmanager
def _fs_errors(path: Path) -> Iterator[None]:
    """The file system refusing a write (read-only, full, no permission) is one line, exit 3."""
    try:
        yield
    except C3Error:
        raise
    except OSError as error:
        raise os_failure(error, path, "write the node registry", hint="check C3_HOME, its folder's permissions and free space") from None


def remove_node(name: str, path: Path | None = None) -> Node:
    """Unregister a node."""
    path = path or paths.nodes_file()
    with _fs_errors(path), locked(path):
        registry = load_registry(path)
        for node in registry.nodes:
            if node.name == name:
                registry.nodes.remove(node)
                _save(registry, path)
                return node
    raise Refused(f"node `{name}` is not registered", hint="`c3 node ls` lists the registered nodes")


def resolve_nodes(names: str | list[str], path: Path | None = None) -> list[Node]:
    """Turn `--nodes a,b` into registered nodes, in the order given; every name must be registered."""
    wanted = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
    wanted = [n for n in wanted if n]
    if not wanted:
        raise UsageError("--nodes must name at least one registered node, e.g. --nodes a,b")
    if len(set(wanted)) != len(wanted):
        raise UsageError("--nodes names a node twice")
    registry = {n.name: n for n in load_registry(path).nodes}
    missing = [n for n in wanted if n not in registry]
    if missing:
        raise Refused(
            f"node(s) not registered: {', '.join(missing)}",
            hint="register each one, this machine included: c3 node add NAME --host URL --ssh USER@HOST",
        )
    return [registry[n] for n in wanted]
