"""A node: its name, the URL where it answers OpenAI requests (`host`) and the SSH target this machine
orchestrates it through (`ssh`), with the address helpers (the parts of the SSH target, whether it is
this machine). The registry file that holds nodes is backend.nodes.registry.

A node is `local` (driven without SSH) when its SSH target names this machine — the endpoint URL does
not count, since a node reached through a tunnel answers on 127.0.0.1 — or when it was added with `--local`.
"""

from __future__ import annotations

import re
import socket
import subprocess
from functools import lru_cache
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, field_validator

from backend.models.names import NODE_NAME_MAX, NODE_NAME_PATTERN, check_endpoint_url, check_ssh_target


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
