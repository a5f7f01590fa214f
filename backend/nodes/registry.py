"""The node registry: `$C3_HOME/nodes.json`, mode 0600, written atomically under a lock (load, save,
add, remove, resolve). The node itself (`Node`: name, endpoint URL, SSH target, whether it is this
machine) is backend.remote.node. Every name passed to `--nodes` anywhere must be registered, this
machine included.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from backend import paths
from backend.atomic import locked, write_atomic
from backend.errors import C3Error, Refused, UsageError, os_failure
from backend.models.names import NODE_NAME_MAX, NODE_NAME_PATTERN, check_endpoint_url, check_ssh_target
from backend.remote.node import Node
from backend.text import show
from backend.userfiles import load_json, read_text


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
