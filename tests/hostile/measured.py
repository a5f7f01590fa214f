"""Run one command and report its own CPU time and peak RSS: `python measured.py REPORT CMD [ARGS...]`.

Why a launcher: Linux carries a process's peak RSS across exec (`exec_mmap` keeps the old address
space's high-water mark), so a child spawned straight from a pytest process that has grown to 560 MB
reports 560 MB whatever it does itself. This small interpreter forks the command from a ~10 MB address
space, waits for it with wait4, and writes "exit-status user-s system-s maxrss-kB" to REPORT.
stdin, stdout and stderr are the command's own (inherited).
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    report, argv = sys.argv[1], sys.argv[2:]
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    with open(report, "w", encoding="ascii") as out:
        out.write(f"{status} {usage.ru_utime} {usage.ru_stime} {usage.ru_maxrss}\n")
    sys.exit(0)


if __name__ == "__main__":
    main()
