"""Per-pod boot logs under `$C3_STATE/boot/<pod>.log`: kept, bounded, rotated (keep 5), mode 0600.

Each boot starts a fresh file (the previous ones shift to `.1` … `.5`); a boot log is capped so a
chatty engine cannot fill the disk (the container keeps its full log; this is the post-mortem copy).

A state folder that cannot take the log (C3_STATE is a file, read-only, full) is found when the log
is opened — before anything is launched — and is one `c3: error:` line with the path (exit 3). A
write that fails later (the disk filled during the boot) stops the log, never the boot in flight;
`error` says why.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

from backend.errors import os_failure
from backend.paths import state_home
from backend.userfiles import read_text

KEEP = 5
MAX_BYTES = 4 * 1024 * 1024


def boot_dir() -> Path:
    """`$C3_STATE/boot`."""
    return state_home() / "boot"


def boot_log_path(pod: str) -> Path:
    """Where a pod's latest boot log is."""
    return boot_dir() / f"{pod}.log"


def read_tail(pod: str, lines: int) -> tuple[Path, list[str]] | None:
    """The last `lines` lines of a pod's latest boot log (None when there is none); the file is read
    as every file c3 reads back — regular files only, capped (a FIFO put there never hangs `pod logs`)."""
    path = boot_log_path(pod)
    text = read_text(path, what="boot log", missing_ok=True, errors="replace")
    if text is None:
        return None
    found = text.splitlines()
    return path, (found[-lines:] if lines else [])


def rotate(path: Path, keep: int = KEEP) -> None:
    """Shift `path` → `.1` → … → `.keep`; the oldest falls off."""
    # Two `pod up`s of one pod may rotate at once: a file the other one already moved is not an error.
    with contextlib.suppress(FileNotFoundError):
        path.with_name(f"{path.name}.{keep}").unlink()
    for n in range(keep - 1, 0, -1):
        with contextlib.suppress(FileNotFoundError):
            path.with_name(f"{path.name}.{n}").rename(path.with_name(f"{path.name}.{n + 1}"))
    with contextlib.suppress(FileNotFoundError):
        path.rename(path.with_name(f"{path.name}.1"))


class BootLog:
    """Append-only writer of one boot's log; thread-safe; silently stops at `max_bytes`."""

    def __init__(self, pod: str, *, max_bytes: int = MAX_BYTES, keep: int = KEEP) -> None:
        self.path = boot_log_path(pod)
        self._lock = threading.Lock()
        self._written = 0
        self._max = max_bytes
        self._capped = False
        self.error: str | None = None
        folder = self.path.parent
        made = not folder.exists()
        fresh = folder / f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.new"  # one per writer
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            # Write the new log's first line through to disk under a temporary name first: a full or
            # read-only C3_STATE shows here, before the engine is launched and before the older logs
            # are rotated, so a refusal leaves the state folder as it was.
            fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.fchmod(fd, 0o600)
            self._file = os.fdopen(fd, "w", encoding="utf-8", errors="replace")
            self._file.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} boot log of pod {pod}\n")
            self._file.flush()
            os.fsync(self._file.fileno())
            rotate(self.path, keep)
            os.replace(fresh, self.path)
        except OSError as error:
            with contextlib.suppress(Exception):
                self._file.close()
            with contextlib.suppress(OSError):
                fresh.unlink()
            if made:
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise os_failure(error, getattr(error, "filename", None) or self.path, "write the boot log",
                             hint="C3_STATE must be a writable folder with free space") from None

    def line(self, text: str) -> None:
        """One timestamped line."""
        self.write(f"{time.strftime('%H:%M:%S')} {text}\n")

    def write(self, text: str) -> None:
        with self._lock:
            if self._capped or self._file.closed:
                return
            data = text if self._written + len(text) <= self._max else text[: max(0, self._max - self._written)]
            try:
                self._file.write(data)
                self._written += len(data)
                if len(data) < len(text):
                    self._file.write(f"\n[boot log capped at {self._max} bytes]\n")
                    self._capped = True
                self._file.flush()
            except OSError as error:
                self._stop(error)

    def _stop(self, error: OSError) -> None:
        self._capped = True
        self.error = f"boot log {self.path} stopped: {error.strerror or error}"
        with contextlib.suppress(OSError):
            self._file.close()

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                try:
                    self._file.close()
                except OSError as error:
                    self._stop(error)
