"""Trusted SSH host keys: which files count, fingerprints, and adding a node's key after the user checked it.

No SSH library here (backend.remote.ssh fetches the key a node offers); only files and hashes, so the CLI
and the cockpit can show and record trust without a connection.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from backend import paths
from backend.atomic import locked, write_atomic
from backend.errors import C3Error
from backend.settings import current
from backend.userfiles import MiB, read_text

KNOWN_HOSTS_LIMIT = 8 * MiB


def managed_known_hosts() -> Path:
    """`$C3_HOME/known_hosts`: the host keys c3 was told to trust (`c3 node trust`)."""
    return paths.config_home() / "known_hosts"


def default_known_hosts_files() -> tuple[Path, ...]:
    """c3's own file, ~/.ssh/known_hosts, then whatever $C3_KNOWN_HOSTS lists (os.pathsep-separated)."""
    files = [managed_known_hosts(), Path.home() / ".ssh" / "known_hosts"]
    files += current().known_hosts_files()
    return tuple(files)


def known_hosts_text(files: Iterable[Path] | None = None) -> str:
    """Every trusted host key line from `files` (default: `default_known_hosts_files()`); unreadable files are skipped."""
    chunks = []
    for file in files or default_known_hosts_files():
        try:  # bounded, regular files only: a FIFO named here must not hang every SSH connection
            chunks.append(read_text(Path(file), what="known_hosts file", limit=KNOWN_HOSTS_LIMIT, missing_ok=True, errors="replace") or "")
        except C3Error:
            continue
    return "\n".join(chunks) + "\n"


def fingerprint(public_key_b64: str) -> str:
    """OpenSSH-style `SHA256:…` fingerprint of a base64 public key blob."""
    digest = hashlib.sha256(base64.b64decode(public_key_b64)).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


@dataclass(frozen=True)
class OfferedKey:
    """The host key a node presents, for the user to check before trusting it."""

    node: str
    """Registry name."""
    pattern: str
    """known_hosts host patterns, comma-separated: the name and its addresses (`[x]:port` off port 22)."""
    key_type: str
    """e.g. ssh-ed25519."""
    key_b64: str
    """Base64 public key blob."""
    fingerprint: str
    """`SHA256:…`, as `ssh-keygen -lf` prints it."""
    already_trusted: bool
    """True when this exact key is already in a trusted file."""


def trust_host_key(offered: OfferedKey) -> Path:
    """Append the offered key to `$C3_HOME/known_hosts` (0600, atomic, locked)."""
    path = managed_known_hosts()
    with locked(path):
        current = read_text(path, what="known_hosts file", limit=KNOWN_HOSTS_LIMIT, missing_ok=True, errors="replace") or ""
        entry = f"{offered.pattern} {offered.key_type} {offered.key_b64}"
        if entry not in current.splitlines():
            write_atomic(path, current + ("" if current.endswith("\n") or not current else "\n") + entry + "\n", mode=0o600)
    return path
