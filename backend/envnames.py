"""Environment variables that reach a shell on a node: names checked, assignments quoted.

Every key that c3 writes into a node's shell (`env K=V …`, `export`, `docker run -e K=V`, an env
file) must be a POSIX name, `[A-Za-z_][A-Za-z0-9_]*`: a key such as `NCCL_X$(touch PWNED)` would
otherwise run on the node. Values are always quoted (shlex), never interpolated.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

from backend.errors import UsageError

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_env_name(name: str, where: str) -> str:
    """`name` when it is a valid variable name; else a UsageError naming `where`."""
    if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
        shown = repr(name)[:60]
        raise UsageError(f"{where}: environment name {shown} is not a valid variable name",
                         hint="names are letters, digits and _ and do not start with a digit, e.g. NCCL_IB_DISABLE")
    return name


def check_env(env: Mapping[str, str], where: str) -> Mapping[str, str]:
    """Every key of `env` checked; values must be strings without NUL (a NUL cannot be passed on)."""
    for key, value in env.items():
        check_env_name(key, where)
        if "\x00" in str(value):
            raise UsageError(f"{where}: the value of {key} holds a NUL byte")
    return env


def assignments(env: Mapping[str, str], where: str = "environment") -> str:
    """`K='v' K2='v2'` for a shell command line (names checked, values quoted)."""
    return " ".join(f"{check_env_name(k, where)}={shlex.quote(str(v))}" for k, v in env.items())
