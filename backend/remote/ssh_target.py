"""Where a node's SSH target really points: the user's OpenSSH config applied, the name resolved.

People register machines as they reach them by hand: `coder@spark1` (a DNS or /etc/hosts name),
`root@[fd00::5]:2222`, or `me@box` where `box` exists only in `~/.ssh/config`. This module turns a
node's target into what OpenSSH would use — `HostName`, `Port`, `User` and `HostKeyAlias` from the
config (the target's own user and port win, as on ssh's command line) — and resolves the host name
to its addresses, so host keys can be matched by name *and* by address the way OpenSSH does
(CheckHostIP) and `c3 node trust` can record both.

The config files are `$C3_SSH_CONFIG` (os.pathsep-separated) when set, else `~/.ssh/config` when it
is readable. asyncssh parses them (only here and in backend.remote.ssh is it imported).
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.settings import current


def quiet_asyncssh_import() -> None:
    """Import asyncssh once with the warnings it raises while importing silenced.

    cryptography 51 deprecates DSA, and asyncssh's modules name DSA types at import time: every `c3`
    command that reached a node printed ten lines of CryptographyDeprecationWarning before its own
    output (and before the one `c3: error:` line that scripts read). c3 never offers DSA keys, so
    these say nothing to its users; warnings raised later, by asyncssh at work, are left alone."""
    if "asyncssh" in sys.modules:
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module=r"asyncssh(\.|$)")
        import asyncssh  # noqa: F401


if TYPE_CHECKING:
    from backend.remote.node import Node

RESOLVE_TIMEOUT_S = 5.0


def ssh_config_files() -> list[str]:
    """The OpenSSH client config files c3 honours (see module docstring)."""
    listed = current().ssh_config
    if listed is not None:
        return [p for p in listed.split(os.pathsep) if p]
    default = Path.home() / ".ssh" / "config"
    return [str(default)] if os.access(default, os.R_OK) else []


def explicit_port(node: Node) -> int | None:
    """The port written in the node's target (`HOST:PORT`, `[V6]:PORT`), or None when it gives none."""
    target = node.ssh.split("@", 1)[-1]
    if target.startswith("["):
        return int(target.rsplit(":", 1)[1]) if "]:" in target else None
    return int(target.rsplit(":", 1)[1]) if target.count(":") == 1 else None


def is_ip(text: str) -> bool:
    """True for an IPv4 or IPv6 literal."""
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


@dataclass(frozen=True)
class SshTarget:
    """A node's SSH endpoint after the user's config: what asyncssh and OpenSSH connect to."""

    target: str
    """The host as registered (a name, an address, or a config alias)."""
    host: str
    """The host after `HostName` from the config."""
    port: int
    """The port (the target's own, else the config's, else 22)."""
    username: str | None
    """The user (the target's own, else the config's)."""
    host_key_alias: str | None
    """`HostKeyAlias` from the config: known_hosts is then looked up under this name only."""
    addresses: tuple[str, ...] = ()
    """The host's addresses, as the resolver returned them (empty when not resolved)."""

    @property
    def key_name(self) -> str:
        """The name host keys are filed under (`HostKeyAlias`, else the host)."""
        return self.host_key_alias or self.host

    def patterns(self) -> list[str]:
        """known_hosts patterns OpenSSH writes for this target: the name, then each address
        (`[x]:port` off port 22); an alias stands alone, as in OpenSSH."""
        names = [self.key_name]
        if not self.host_key_alias:
            names += [a for a in self.addresses if a != self.key_name]
        return [n if self.port == 22 else f"[{n}]:{self.port}" for n in names]

    def trusted_keys(self, known_hosts: Any) -> list[Any]:
        """Host keys an asyncssh SSHKnownHosts trusts for this target, by name or by any address
        (what asyncssh itself accepts when it connects)."""
        keys: list[Any] = []
        port = self.port if self.port != 22 else None
        addrs = [""] if self.host_key_alias or not self.addresses else list(self.addresses)
        for addr in addrs:
            for key in known_hosts.match(self.key_name, addr, port)[0]:
                if all(k.public_data != key.public_data for k in keys):
                    keys.append(key)
        return keys

    def trusts_everywhere(self, known_hosts: Any, public_data: bytes) -> bool:
        """True when `public_data` is trusted under every pattern (the name and each address), so
        `c3 node trust` has nothing left to record."""
        port = self.port if self.port != 22 else None
        checks = [(self.key_name, "")]
        if not self.host_key_alias:
            checks += [("", a) for a in self.addresses if a != self.key_name]
        return all(any(k.public_data == public_data for k in known_hosts.match(host, addr, port)[0]) for host, addr in checks)


def connect_options(node: Node) -> dict[str, Any]:
    """Keyword arguments for asyncssh that make it read the same config (host stays as registered)."""
    kwargs: dict[str, Any] = {"config": ssh_config_files()}
    port = explicit_port(node)
    if port is not None:
        kwargs["port"] = port
    if node.ssh_user:
        kwargs["username"] = node.ssh_user
    return kwargs


def apply_config(node: Node) -> SshTarget:
    """The node's target with the user's OpenSSH config applied (no network)."""
    quiet_asyncssh_import()
    import asyncssh

    kwargs = connect_options(node)
    options = asyncssh.SSHClientConnectionOptions(host=node.ssh_host, known_hosts=None, **kwargs)
    return SshTarget(
        target=node.ssh_host,
        host=str(options.host or node.ssh_host),
        port=int(options.port or 22),
        username=node.ssh_user or (str(options.username) if options.username else None),
        host_key_alias=options.host_key_alias or None,
    )


async def resolve_target(node: Node, timeout: float = RESOLVE_TIMEOUT_S) -> SshTarget:
    """`apply_config`, then the host's addresses; raises OSError (socket.gaierror) when the name does
    not resolve and TimeoutError when the resolver takes longer than `timeout`."""
    target = apply_config(node)
    if is_ip(target.host):
        return SshTarget(**{**target.__dict__, "addresses": (str(ipaddress.ip_address(target.host)),)})
    loop = asyncio.get_running_loop()
    infos = await asyncio.wait_for(loop.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM), timeout)
    addresses: list[str] = []
    for info in infos:
        address = str(info[4][0]).split("%", 1)[0]
        if address not in addresses:
            addresses.append(address)
    return SshTarget(**{**target.__dict__, "addresses": tuple(addresses)})
