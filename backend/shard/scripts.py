"""The scripts a shard runs on its nodes (through backend.remote.shell's Shell: locally on the head,
normally, or over SSH): the launch of one step, the kill of a process group, the sweep of whatever
carries `C3_SHARD`. A spawned script is the leader of its own process group (`Shell.spawn`), so the
whole group can be stopped later by that number.
"""

from __future__ import annotations

import shlex

from backend.envnames import assignments, check_env_name
from backend.remote.shell import CommandResult, NodeFailure, Shell
from backend.shard.models import Step


async def run_script(shell: Shell, script: str, *, timeout: float = 30, stdin: str | None = None) -> CommandResult:
    """Run a short script; a timeout is a result (exit -1, the reason on stderr), not an exception,
    so probes and stops report it next to the other nodes' answers."""
    try:
        return await shell.run(script, input=stdin, timeout=timeout)
    except NodeFailure as failure:
        if failure.kind != "timeout":
            raise
        return CommandResult(shell.node.name, script, -1, "", failure.detail)


def launch_script(env: dict[str, str], step: Step, *, tag: str, secret_names: list[str]) -> str:
    """The script that runs one step: read secrets from stdin, exec the program.

    Secrets arrive as `NAME=VALUE` lines on stdin ended by an empty line, so they never appear in an
    argv (visible in `ps` on the node) or in the SSH command line.
    """
    lines = ["exec </dev/null" if not secret_names else
             'while IFS= read -r c3_line; do [ -z "$c3_line" ] && break; export "$c3_line"; done; exec </dev/null']
    lines.append(f"export C3_SHARD={shlex.quote(tag)}")
    for name in secret_names:
        check_env_name(name, "secret")
    words = assignments({**env, **step.env}, "shard environment")
    lines.append(f"exec env {words} {' '.join(shlex.quote(a) for a in step.argv)} 2>&1")
    return "\n".join(lines) + "\n"


def secrets_stdin(secrets: dict[str, str]) -> str | None:
    """What `launch_script` reads from stdin (None when there are no secrets)."""
    if not secrets:
        return None
    return "".join(f"{check_env_name(k, 'secret')}={v}\n" for k, v in secrets.items() if "\n" not in v) + "\n"


def kill_group_script(pgid: int, grace_s: float, *, settle_s: float = 0) -> str:
    """TERM a process group, wait up to `grace_s`, then KILL what is left.

    With `settle_s`, first give the group that long to end by itself (a `ray start --block` exits on
    its own once `ray stop` took its daemons; a SIGTERM would make it drain for up to 30 s instead).
    """
    if pgid <= 1:
        # `kill -TERM -1` means every process the user may signal, `-0` the caller's own group.
        raise ValueError(f"refusing to signal process group {pgid}")
    ticks = max(1, int(grace_s * 10))
    settle = int(settle_s * 10)
    return (
        f"i=0; while [ $i -lt {settle} ]; do kill -0 -{pgid} 2>/dev/null || exit 0; sleep 0.1; i=$((i+1)); done\n"
        f"kill -TERM -{pgid} 2>/dev/null || exit 0\n"
        f"i=0; while [ $i -lt {ticks} ]; do kill -0 -{pgid} 2>/dev/null || exit 0; sleep 0.1; i=$((i+1)); done\n"
        f"kill -KILL -{pgid} 2>/dev/null; exit 0\n"
    )


STOP_MARKERS = '"$HOME"/.c3/shard'
"""Where `c3 shard stop` leaves `stopped-<tag>` on each node (the node user's home, whichever machine
runs the stop), so the foreground `shard start` can tell a deliberate stop from a crash."""


def plain_tag(tag: str) -> bool:
    """A shard tag c3 could have made (`HEAD-PORT`: letters, digits, `.`, `_`, `-`)."""
    return bool(tag) and len(tag) <= 200 and tag.isascii() and tag.replace("-", "").replace(".", "").replace("_", "").isalnum()


def marker_script(action: str, tag: str) -> str:
    """`clear` the stop marker of `tag` (a start does, first), or `check` it (prints `stop=requested`)."""
    if not plain_tag(tag):
        raise ValueError(f"shard tag {tag!r} is not a plain name")
    path = f"{STOP_MARKERS}/stopped-{tag}"
    if action == "clear":
        return f"rm -f {path}\n"
    return f"[ -e {path} ] && echo stop=requested; exit 0\n"


def tagged_script(action: str, grace_s: float = 10, *, tag: str | None = None, mark: bool = False) -> str:
    """List (`list`) or stop (`stop`) every process whose environment has C3_SHARD (= `tag` when given).

    Found through /proc/PID/environ, so `stop` needs no state file and touches nothing c3 did not start.
    With `mark` (`c3 shard stop`), each tag found gets its stop marker before any process is signalled.
    """
    if tag is not None and not plain_tag(tag):
        raise ValueError(f"shard tag {tag!r} is not a plain name")
    # Tags are node names and a port: a dot is their one regex character.
    pattern = "^C3_SHARD=" + (tag.replace(".", "\\.") + "$" if tag else "")
    find = (f"c3_pids() {{ grep -lz {shlex.quote(pattern)} /proc/[0-9]*/environ 2>/dev/null "
            "| sed -n 's|^/proc/\\([0-9]*\\)/environ$|\\1|p' | grep -vx \"$$\"; }")
    # Each process's own tag (the first C3_SHARD of its environment): which shard it belongs to.
    tag_of = "tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null | sed -n 's/^C3_SHARD=//p' | head -n 1"
    if action == "list":
        # `proc=PID TAG COMMAND`. 1,000 characters: a rank's `--node-rank` comes after long venv and model
        # paths (the display cuts to 160).
        return find + ("\nfor p in $(c3_pids); do printf 'proc=%s %s %s\\n' \"$p\" \"$(" + tag_of + ")\" "
                       "\"$(tr '\\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-1000)\"; done\n")
    ticks = max(1, int(grace_s * 10))
    # A tag read from a process's environment is used as a file name only when it is a plain name.
    mark_tags = (f"mkdir -p {STOP_MARKERS} 2>/dev/null; for p in $pids; do t=$({tag_of}); "
                 f"case \"$t\" in ''|*[!A-Za-z0-9._-]*) ;; *) : > {STOP_MARKERS}/stopped-\"$t\";; esac; done\n")
    # `shard=TAG` once per shard about to be stopped, so the stop can say which it stopped.
    say_tags = f"for p in $pids; do {tag_of}; done | sort -u | sed 's/^/shard=/'\n"
    return (
        find + "\n"
        "pids=$(c3_pids); [ -z \"$pids\" ] && { echo stopped=0; exit 0; }\n"
        + say_tags + (mark_tags if mark else "") +
        "n=$(echo $pids | wc -w); kill -TERM $pids 2>/dev/null\n"
        f"i=0; while [ $i -lt {ticks} ] && [ -n \"$(c3_pids)\" ]; do sleep 0.1; i=$((i+1)); done\n"
        "left=$(c3_pids); [ -n \"$left\" ] && kill -KILL $left 2>/dev/null\n"
        "echo \"stopped=$n killed=$(echo $left | wc -w)\"\n"
    )
