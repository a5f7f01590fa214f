"""The one systemd unit writer: every unit c3 installs (the pool router, the cluster and its watchdog)
is rendered here, with each directive's value escaped the way systemd.syntax(7) and
systemd.service(5) read it.

- Every value: `%` is a specifier (`%h`, `%n`, …), so a literal one is `%%`.
- `ExecStart=`/`ExecStop=`: split into words like a shell, but only quotes and backslashes count; a
  word with anything but `[A-Za-z0-9_@%+=:,./-]` is written in double quotes with `\\` and `"`
  backslash-escaped. In the arguments `$` (variable expansion) becomes `$$`; in the program's path
  it stays as it is (systemd expands nothing there), and a path with a quote or a backslash is
  refused: systemd will not run such an executable ("contains special characters"). Both checked
  against `systemd-analyze verify` (tests/infra/test_systemd_unit.py).
- `Environment=`: one quoted `NAME=value` word; `$` has no meaning there and stays as it is.
- Line breaks and other control characters cannot be written into a unit line at all; they are
  refused (UsageError, exit 2) rather than silently cutting the directive short.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from backend.envnames import check_env_name
from backend.errors import UsageError
from backend.text import show

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# systemd.unit(5): a name of ASCII letters, digits and `:-_.\`, an optional `@instance`, and a unit type
# suffix. It may not start with `-`, so no unit name reaches systemctl as an option.
_UNIT_STEM = r"[A-Za-z0-9:_.\\][A-Za-z0-9:_.\\-]*(?:@[A-Za-z0-9:_.\\-]*)?"
_UNIT_NAME = re.compile(_UNIT_STEM + r"\.(?:service|socket|target|device|mount|automount|swap|path|timer|slice|scope)")
_BARE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")  # a word that needs no quotes (kept readable)


def check_unit_name(name: str, what: str = "unit name", *, suffix: bool = True) -> str:
    """`name` when it is a systemd unit name (`vllm.service`, `vllm@1.service`; with `suffix=False` also
    `vllm`, which systemctl reads as vllm.service); else a UsageError (exit 2)."""
    pattern = _UNIT_NAME if suffix else re.compile(_UNIT_STEM)
    if not isinstance(name, str) or len(name) > 255 or not pattern.fullmatch(name):
        raise UsageError(f"{what} `{show(name, 80)}` is not a systemd unit name",
                         hint="a unit name such as vllm.service: letters, digits, `:-_.@`, a type suffix, not starting with `-`")
    return name


def _plain(value: str, what: str) -> str:
    if _CONTROL.search(value):
        raise UsageError(f"{what} holds a line break or control character, which a systemd unit cannot carry",
                         hint="install c3, C3_HOME and C3_STATE under plain paths")
    return value.replace("%", "%%")


def _quoted(value: str, what: str) -> str:
    escaped = _plain(value, what)
    if _BARE.fullmatch(value):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def exec_line(argv: Sequence[str]) -> str:
    """An `Exec*=` value: every argument survives systemd's word splitting, specifiers and `$VAR` expansion."""
    if not argv or not argv[0].startswith("/"):
        raise ValueError("the program of an Exec line must be an absolute path")
    program = argv[0]
    if any(c in program for c in "\"'\\"):
        raise UsageError(f"systemd cannot run a program whose path holds a quote or a backslash: {program[:200]}",
                         hint="install c3 under a path without quotes or backslashes")
    return " ".join([_quoted(program, "the program path"), *(_quoted(arg, "a command argument").replace("$", "$$") for arg in argv[1:])])


def environment_line(name: str, value: str) -> str:
    """An `Environment=` value for one variable."""
    check_env_name(name, "unit environment")
    return _quoted(f"{name}={value}", f"the value of {name}")


def path_value(path: str) -> str:
    """A path directive's value (`EnvironmentFile=`, `WorkingDirectory=`): specifiers escaped, no quoting."""
    return _plain(path, "a path")


def plain_value(value: str) -> str:
    """A free-text value (`Description=`, a unit name): specifiers escaped."""
    return _plain(value, "a unit setting")


@dataclass
class Unit:
    """A unit file as ordered sections of `Key=value` lines; values are already escaped by the helpers above."""

    header: str = ""
    """A comment written first (`# Written by …`)."""
    sections: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def add(self, section: str, key: str, value: str) -> Unit:
        self.sections.setdefault(section, []).append((key, value))
        return self

    def exec(self, key: str, argv: Sequence[str]) -> Unit:
        return self.add("Service", key, exec_line(argv))

    def environment(self, env: Mapping[str, str]) -> Unit:
        for name, value in env.items():
            self.add("Service", "Environment", environment_line(name, value))
        return self

    def text(self) -> str:
        lines = [f"# {line}" for line in self.header.splitlines()]
        for section, entries in self.sections.items():
            if lines:
                lines.append("")
            lines.append(f"[{section}]")
            lines += [f"{key}={value}" for key, value in entries]
        return "\n".join(lines) + "\n"
