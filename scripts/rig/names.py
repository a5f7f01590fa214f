"""Host names for test hosts: lines this rig adds to /etc/hosts, and removes again.

glibc, OpenSSH and asyncssh all resolve /etc/hosts, so a test host gets a DNS-style name
(`c3h-<tag>-h1.test`) that every tool resolves the way a user's LAN names resolve. Each line ends in
`# c3-rig <tag> <folder>`: teardown removes only the lines carrying its own tag, and a later session
removes lines whose rig folder is gone (a session killed before its teardown). Every edit holds the rig's
machine-wide lock and replaces the file atomically (a reader never sees half a file).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

HOSTS_FILE = Path(os.environ.get("C3_RIG_HOSTS_FILE", "/etc/hosts"))
MARK = "# c3-rig "
LOCK_FILE = Path("/run/c3-test-hosts.lock")


def host_name(tag: str, host: str, *, v6: bool = False) -> str:
    """The name a rig host answers to (`-v6` names resolve to its IPv6 address only)."""
    return f"c3h-{tag.lower().replace('_', '-')}-{host}{'-v6' if v6 else ''}.test"


def _rewrite(keep, add: Iterable[str] = (), path: Path | None = None) -> None:
    path = path or HOSTS_FILE
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK_FILE, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        text = path.read_text()
        lines = [line for line in text.splitlines() if keep(line)]
        lines += list(add)
        fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=".c3-hosts-")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write("\n".join(lines) + "\n")
            shutil.copymode(path, tmp)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _mark_of(line: str) -> tuple[str, str] | None:
    match = re.search(re.escape(MARK) + r"(\S+) (\S+)\s*$", line)
    return (match.group(1), match.group(2)) if match else None


def _tag_of(line: str) -> str | None:
    mark = _mark_of(line)
    return mark[0] if mark else None


def add_names(tag: str, folder: Path, entries: Iterable[tuple[str, str]], path: Path | None = None) -> None:
    """Add `address name` lines for this rig (tagged, so only they are removed later)."""
    _rewrite(lambda line: True, [f"{address} {name} {MARK}{tag} {folder}" for address, name in entries], path)


def remove_names(tag: str, path: Path | None = None) -> None:
    """Remove every line this rig (tag) added; nothing else."""
    _rewrite(lambda line: _tag_of(line) != tag, (), path)


def _alive(line: str) -> bool:
    mark = _mark_of(line)
    return mark is None or Path(mark[1]).exists()


def reap_stale_names(path: Path | None = None) -> None:
    """Remove tagged lines of rigs whose folder no longer exists (their session died before teardown)."""
    target = path or HOSTS_FILE
    if all(_alive(line) for line in target.read_text().splitlines()):
        return
    _rewrite(_alive, (), path)
