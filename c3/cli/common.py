"""Helpers every CLI module shares: JSON output, the `--file` option, GPU-list parsing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from backend.errors import UsageError


class PortType(click.ParamType[int, Any]):
    """A TCP port flag: `backend.limits.port_text`'s rule and words (the range has one place)."""

    name = "port"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from backend.models.ports import port_text

        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # a default given as a number
        try:
            return port_text(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


PORT = PortType()
"""The type of every port option (`--port`, `--gateway-port`, `--ray-port`…)."""


def emit_json(payload: Any) -> None:
    """Print one JSON document on stdout (the scriptable contract)."""
    click.echo(json.dumps(payload, indent=2, sort_keys=False, default=str))


def parse_index_list(text: str, *, what: str = "--gpus") -> list[int]:
    """Parse `0,1,3` into indices; blanks dropped; anything else is a usage error."""
    items = [part.strip() for part in text.split(",") if part.strip()]
    if not items:
        raise UsageError(f"{what} must list at least one index, e.g. {what} 1,2")
    indices: list[int] = []
    for item in items:
        if not item.isdigit():
            raise UsageError(f"{what}: `{item}` is not a GPU index", hint=f"use host indices as `c3 gpus` lists them, e.g. {what} 0,1")
        value = int(item)
        if value in indices:
            raise UsageError(f"{what}: GPU {value} is listed twice")
        indices.append(value)
    return indices


def file_option(func: Any) -> Any:
    """`--file PATH`: select another estate file (default `$C3_HOME/estate.yml`)."""
    return click.option(
        "--file",
        "file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Estate file (default $C3_HOME/estate.yml).",
    )(func)


def json_option(func: Any) -> Any:
    """`--json`: machine-readable output."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(func)


def echo_line(step: Any) -> None:
    """Print a running write's own lines (`backend.actions.Progress.line`), nothing else."""
    if step.line is not None:
        click.echo(step.line)


def given_flags(params: dict[str, Any], always: frozenset[str] = frozenset()) -> dict[str, float | str]:
    """`… install-service`: the options among `params` the user passed (not left at their default), and
    those in `always`, by long flag, in `--help` order; a path written absolute. Defaults stay out of the
    unit so that it follows the defaults of the c3 it runs."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    flags: dict[str, float | str] = {}
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or param.name not in params:
            continue
        if param.name in always or ctx.get_parameter_source(param.name) is not ParameterSource.DEFAULT:
            value = params[param.name]
            flags[max(param.opts, key=len)] = str(Path(value).expanduser().absolute()) if isinstance(value, Path) else value
    return flags


def install_unit(action: Any, dry_run: bool, dry_note: str | None = None) -> None:
    """`… install-service`: show the unit and where it goes, refuse what `systemd-analyze verify` rejects,
    then write it (or, with --dry-run, say that nothing was written)."""
    from backend.errors import Refused

    text = action.text()
    click.echo(f"# {action.path}")
    click.echo(text, nl=False)
    ok, output = action.verify(text)
    if ok is None:
        click.echo(f"# {output}")
    elif not ok:
        raise Refused(f"systemd-analyze verify rejected the unit: {output.splitlines()[0] if output else 'unknown error'}")
    else:
        click.echo("# systemd-analyze verify: ok")
    if dry_run:
        if dry_note:
            click.echo(f"# {dry_note}")
        click.echo("# dry run: nothing written")
        return
    done = action.run(echo_line)
    click.echo(done.message)
    click.echo(done.hint)


def node_trouble(label: str, reachable: bool, error: str | None) -> bool:
    """Print `LABEL: unreachable: …` or `LABEL: <error>` for a node that could not be read; True if it was one."""
    if not reachable or error:
        click.echo(f"{label}: {'unreachable: ' if not reachable else ''}{error}")
        return True
    return False


def exit_if_unreachable(unreachable: list[str], total: int) -> None:
    """After every row is printed: an unreachable node is the environment refusing (DESIGN.md exit
    codes, as for `c3 node status`), one error line and exit 3."""
    if unreachable:
        from c3.cli.terminal import error_line

        error_line(f"{len(unreachable)} of {total} node(s) unreachable: {', '.join(unreachable)}",
                   hint="check the node's SSH target with `c3 node status NAME`")
        sys.exit(3)
