"""Cleaning up test hosts without ever signalling a process the rig did not start.

Pids are reused fast on a busy machine (the whole 32768 range can turn over in minutes), so a
number alone proves nothing. Every signal here goes either

- to a child through its `subprocess.Popen`, which only signals while the child is unreaped (an
  unreaped child's pid cannot be reused), or
- through a pidfd opened *before* checking that the process sits inside a network namespace the
  rig created: the pidfd pins that very process, so a pid that died and was reused after the check
  cannot be hit.

No pkill, no killall, no kill by name.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
from pathlib import Path

NETNS_DIR = Path("/var/run/netns")


def _quiet(argv: list[str], timeout: float = 30) -> str:
    """Run a clean-up command; its stdout, or "" when it failed (clean-up goes on regardless)."""
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return result.stdout if result.returncode == 0 else ""


def in_netns(pid: int, netns: str) -> bool:
    """True when `pid`'s network namespace is the namespace `netns` (by device and inode)."""
    if pid <= 1 or pid == os.getpid():
        return False
    try:
        mine = os.stat(NETNS_DIR / netns)
        theirs = os.stat(f"/proc/{pid}/ns/net")
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)


def netns_pids(netns: str) -> list[int]:
    """Pids `ip netns pids` lists for `netns` (a candidate list only: `stop_in_netns` checks each)."""
    return [int(p) for p in _quiet(["ip", "netns", "pids", netns]).split() if p.isdigit()]


def peer_netns(veth: str) -> str | None:
    """The named namespace the other end of `veth` lives in (None when there is no such link)."""
    words = _quiet(["ip", "-o", "link", "show", "dev", veth]).split()
    return words[words.index("link-netns") + 1] if "link-netns" in words[:-1] else None


def _exited(fd: int, wait_s: float) -> bool:
    # A pidfd turns readable when its process has ended.
    return bool(select.select([fd], [], [], max(0.0, wait_s))[0])


def _signal_until_gone(fd: int, grace_s: float) -> None:
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            signal.pidfd_send_signal(fd, sig)
        except ProcessLookupError:
            return
        if _exited(fd, wait_s):
            return


def stop_in_netns(pid: int, netns: str, grace_s: float) -> bool:
    """TERM (then KILL after `grace_s`) the process `pid`, only if it lives inside `netns`.

    Returns True when it was ours and was signalled. Reaps it when it is this process's child.
    """
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return False  # already gone
    try:
        if not in_netns(pid, netns):
            return False
        _signal_until_gone(fd, grace_s)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitid(os.P_PIDFD, fd, os.WEXITED | os.WNOHANG)
        return True
    finally:
        os.close(fd)


def stop_netns(netns: str, grace_s: float = 2.0) -> None:
    """Stop everything still inside `netns` (containers, SSH sessions, daemons: all started there by us)."""
    for pid in netns_pids(netns):
        stop_in_netns(pid, netns, grace_s)


def stop_child(proc: subprocess.Popen, grace_s: float) -> None:
    """TERM (then KILL) a child this process started; nothing happens once it has been reaped."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)


def unmount_under(folder: Path) -> None:
    """Lazily unmount every mount point below `folder` (deepest first)."""
    prefix = str(folder.resolve()) + "/"
    try:
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return
    for point in sorted((m for m in mounts if m.startswith(prefix)), key=len, reverse=True):
        _quiet(["umount", "-l", point])


def remove_folder(folder: Path) -> None:
    # `rm -rf` is several times faster than shutil.rmtree on a docker data root's many small files.
    _quiet(["rm", "-rf", "--one-file-system", str(folder)], timeout=300)


def reap_stale(base: Path) -> list[Path]:
    """Tear down rigs left by sessions that died without teardown (their owner pid is gone).

    Only rigs recorded in `c3h-*/rig.json` are touched, and only processes inside their recorded
    namespaces are signalled. A live owner (or a reused owner pid) keeps its rig: the safe side.
    """
    reaped = []
    for record_file in base.glob("c3h-*/rig.json"):
        try:
            record = json.loads(record_file.read_text())
            owner = int(record["owner"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if owner == os.getpid() or Path(f"/proc/{owner}").exists():
            continue
        folder = record_file.parent
        for netns in record.get("netns", []):
            stop_netns(str(netns))
        unmount_under(folder)
        for veth in record.get("veth", []):
            # Only while its peer is still in one of the recorded namespaces: a rig that half tore
            # itself down may have freed the name, and another rig may be using it now.
            if peer_netns(str(veth)) in record.get("netns", []):
                _quiet(["ip", "link", "del", str(veth)])
        for netns in record.get("netns", []):
            _quiet(["ip", "netns", "del", str(netns)])
        remove_folder(folder)
        reaped.append(folder)
    return reaped
