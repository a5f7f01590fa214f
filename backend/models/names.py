"""The naming and address rules of pods and nodes, in one place and free of pydantic: the models
(`Pod`, the registry's `Node`), `c3 node add` and the cockpit's forms all check with these, so a
form's message as typed is what the write would refuse with.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlparse

from backend import limits
from backend.text import show

POD_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]*$"
"""A pod's name: `c3-<name>` is its container, so lower-case letters, digits and `-`."""
POD_NAME_MAX = 63
NODE_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
"""A node's registry name."""
NODE_NAME_MAX = 63


def pod_name_problem(name: str) -> str | None:
    """Why `name` cannot be a pod's name (None when it can)."""
    if not re.fullmatch(POD_NAME_PATTERN, name) or len(name) > POD_NAME_MAX:
        return "lower-case letters, digits and -, starting with a letter or digit"
    return None


def node_name_problem(name: str) -> str | None:
    """Why `name` cannot be a node's name (None when it can)."""
    if not re.fullmatch(NODE_NAME_PATTERN, name) or len(name) > NODE_NAME_MAX:
        return "lower-case letters, digits, _ and -, starting with a letter or digit"
    return None


_HOSTNAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?")
_SSH_TARGET = re.compile(r"(?P<user>[A-Za-z0-9._-]{1,64})@(?:\[(?P<v6>[0-9a-fA-F:.]+)\]|(?P<host>[A-Za-z0-9._-]{1,253}))(?::(?P<port>\d{1,5}))?")


_ZONE = re.compile(r"[A-Za-z0-9_.-]{1,15}")
"""An IPv6 zone id: an interface name (Linux allows 15 bytes; these are the characters real ones use)."""


def _split_zone(host: str) -> tuple[str, str | None]:
    """(address, zone) of `ADDR%ZONE` or the URL form `ADDR%25ZONE` (RFC 6874); ValueError for a
    zone that is not an interface name, or one on anything but an IPv6 address. `%25` is read as the
    URL escape, so an interface literally named `25…` is written `%2525…`."""
    address, percent, zone = host.partition("%")
    if not percent:
        return host, None
    zone = zone[2:] if zone.startswith("25") else zone
    if ":" not in address or not _ZONE.fullmatch(zone):
        raise ValueError(f"`{show(host, 80)}` has a zone id that is not an interface name ([A-Za-z0-9_.-], at most 15)")
    return address, zone


def _valid_host(host: str) -> bool:
    """A DNS name or an IP address (IPv6 without its brackets, with at most an interface-name zone id)."""
    try:
        address, _zone = _split_zone(host)
        ipaddress.ip_address(address)
        return True
    except ValueError:
        return "%" not in host and bool(_HOSTNAME.fullmatch(host)) and not host.replace(".", "").isdigit()


def host_url(host: str, port: int, *, scheme: str = "http", path: str = "") -> str:
    """`scheme://host:port` + `path`, the one place c3 builds a URL from a host and a port: an IPv6
    address goes in brackets (`http://[::1]:8000`, never the invalid `http://::1:8000`) with its zone
    id escaped as `%25` (`[fe80::1%25eth0]`). ValueError for a host that is no DNS name or address."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not _valid_host(bare):
        raise ValueError(f"`{show(host, 80)}` is not a host name or an IP address")
    address, zone = _split_zone(bare)
    shown = f"[{address}%25{zone}]" if zone else f"[{address}]" if ":" in address else address
    return f"{scheme}://{shown}:{limits.port(port)}{path}"


_SCHEME = re.compile(r"https?:[/\\]*", re.IGNORECASE)


def redact_url(url: str) -> str:
    """`url` for messages, with nothing that may be a secret: everything before its last `@` but the
    scheme becomes `***` and a query or fragment becomes `?***`. Malformed URLs are where passwords
    leaked (`http:/u:PASS@h`, backslashes, a `/` inside the password, no scheme, `?password=`), so
    this rule does not parse: it redacts first and shortens after (a cut must not keep the secret)."""
    text = str(url)[:4096]
    if "@" in text:
        scheme = _SCHEME.match(text)
        text = (scheme.group() if scheme else "") + "***@" + text.rsplit("@", 1)[1]
    return show(re.sub(r"[?#].*", "?***", text, flags=re.DOTALL), 200)


def redact_ssh_target(target: str) -> str:
    """`target` for messages: a `user:password@` part (ssh takes no password there) becomes `***@`."""
    text = str(target)[:4096]
    user, at, rest = text.rpartition("@")
    return show(f"***@{rest}" if at and ":" in user else text, 80)


def check_endpoint_url(url: str) -> str:
    """An http(s) base URL with a valid host and port and no credentials; ValueError says why.

    The message never repeats a password: credentials in the URL are refused, not echoed.
    """
    if not isinstance(url, str) or not url or len(url) > 2048:
        raise ValueError("must be an http(s) URL of at most 2048 characters")
    parsed = urlparse(url.strip())
    if parsed.scheme not in {"http", "https"} or not parsed.netloc:
        raise ValueError(f"`{show(redact_url(url), 120)}` is not an http(s) URL")
    if "@" in parsed.netloc:
        raise ValueError(f"`{redact_url(url)}` carries credentials (user:password@); c3 stores no secrets in nodes.json")
    try:
        port = parsed.port
    except ValueError:
        raise ValueError(f"`{redact_url(url)}` has a port that is not a number from 1 to 65535") from None
    if port is not None and not limits.is_port(port):  # urllib takes 0 (and nothing past 65535)
        raise ValueError(f"`{redact_url(url)}` has port {port}")
    host = parsed.hostname or ""
    if not host or not _valid_host(host):
        raise ValueError(f"`{redact_url(url)}` has no valid host name or address")
    if parsed.query or parsed.fragment:
        raise ValueError(f"`{redact_url(url)}` has a query or fragment; give the base URL")
    return url.strip().rstrip("/")


def check_ssh_target(target: str) -> str:
    """`USER@HOST[:PORT]` (IPv6 in brackets) with a valid host and port; ValueError says why."""
    match = _SSH_TARGET.fullmatch(target) if isinstance(target, str) else None
    if match is None:
        raise ValueError(f"`{redact_ssh_target(target)}` is not USER@HOST[:PORT]")
    host = match["v6"] or match["host"]
    if not _valid_host(host) or (match["v6"] and ":" not in host):
        raise ValueError(f"`{redact_ssh_target(target)}` has no valid host name or address")
    if match["port"] is not None and not limits.is_port(int(match["port"])):
        raise ValueError(f"`{redact_ssh_target(target)}` has a port outside 1–65535")
    return target
