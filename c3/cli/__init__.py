"""The `c3` command line: a click group whose subcommands live in one module each, loaded lazily
(so `c3 gpus` does not pay for importing Textual or docker-py, and `c3 --help` imports none of them).

Every user mistake and unreachable service ends as one `c3: error: …` line (plus an optional
`hint: …`) and the documented exit code — never a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import click

from backend.errors import C3Error, PhaseFailure, terminal_safe
from c3.cli.terminal import error_line, sanitized_output

# name -> "module:attribute"; each module is owned by one feature area.
COMMANDS: dict[str, str] = {
    "demo": "c3.cli.cockpit:demo",
    "gpus": "c3.cli.gpus:gpus",
    "catalog": "c3.cli.catalog:catalog",
    "fit": "c3.cli.fit:fit",
    "bootlog": "c3.cli.bootlog:bootlog",
    "pod": "c3.cli.pod:pod",
    "up": "c3.cli.estate_run:up",
    "down": "c3.cli.estate_run:down",
    "serve": "c3.cli.serve:serve",
    "node": "c3.cli.node:node",
    "cache": "c3.cli.cache:cache",
    "recipes": "c3.cli.recipes:recipes",
    "profile": "c3.cli.profile:profile",
    "pool": "c3.cli.pool:pool",
    "gateway": "c3.cli.gateway:gateway",
    "shard": "c3.cli.shard:shard",
    "spark": "c3.cli.spark:spark",
}

# name -> the first paragraph of that command's help, which is all `c3 --help` lists of it. Kept here
# so the listing imports no command module (all of them, with pydantic and the catalog, cost more than
# the rest of `c3 --help`, issue 22); tests/cli/test_startup_imports.py checks they are the commands' own.
SUMMARIES: dict[str, str] = {
    "demo": "The cockpit on a built-in simulated rig with a simulated runtime (no GPU, no Docker needed).",
    "gpus": "List this machine's GPUs: memory, compute capability, load, and the card profile they map to.",
    "catalog": "List the catalog: built-in slugs merged with $C3_HOME/catalog.d/*.yaml (same slug replaces).",
    "fit": "Price a launch with the engine's own memory rules before anything boots.",
    "bootlog": "Read an engine's boot log (a file, or - for stdin, e.g. `docker logs c3-chat 2>&1 | c3 bootlog -`).",
    "pod": "Plan pods: one model pinned to a GPU set and a port, in the estate file.",
    "up": "Boot the whole estate (pods already running are left alone).",
    "down": "Stop the estate's pods (all, or --only some).",
    "serve": "Serve one model without pods: pick GPUs, check the fit, boot, wait until it serves, verify placement.",
    "node": "Machines c3 drives: `--host` is where a node answers OpenAI requests, `--ssh` how c3 reaches it.",
    "cache": "Model weights on disk: what each node has cached, how big, and what a slug would download.",
    "recipes": "Configurations run and measured on named hardware, launched across nodes over SSH.",
    "profile": "Launched recipe profiles; most commands act on the active one unless NAME is given.",
    "pool": "Replicas behind one sticky, failure-aware OpenAI endpoint.",
    "gateway": "One OpenAI endpoint for the estate's pods: routes by model name, starts a stopped pod on demand.",
    "shard": "One model split across nodes (Ray or vLLM's multiprocessing backend). Runs on the head node.",
    "spark": "DGX Spark host preparation (native vLLM installs).",
}

# Arguments that make click print a page and stop before any command runs (see `main`).
_PAGE_FLAGS = frozenset({"-h", "--help", "--version"})


class LazyGroup(click.Group):
    """A group that imports a subcommand's module only when that subcommand runs."""

    _listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        if self._listing:
            # The help page's list: a stand-in carrying the summary click shortens, nothing imported.
            return click.Command(cmd_name, help=SUMMARIES[cmd_name])
        module_name, attr = target.split(":", 1)
        command: click.Command = getattr(importlib.import_module(module_name), attr)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's own command list, from the summaries above instead of the imported commands."""
        self._listing = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._listing = False


@click.group(cls=LazyGroup, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--readonly", is_flag=True, help="Cockpit: refuse every write.")
@click.option("--color", type=click.Choice(["auto", "truecolor", "256", "16"]), default="auto", help="Cockpit colour depth.")
@click.option("--no-mouse", is_flag=True, help="Cockpit: do not capture the mouse (keeps terminal copy/paste).")
@click.option("--ascii", "ascii_only", is_flag=True, help="Cockpit: draw ASCII only (also C3_ASCII=1; automatic when the locale is not UTF-8).")
@click.option("--bell", is_flag=True, help="Cockpit: ring the terminal bell when a pod gets into trouble (failed, misplaced, unhealthy, preempting).")
@click.option("--file", "estate_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Cockpit: the estate file to show and edit (default $C3_HOME/estate.yml), as `--file` everywhere.")
@click.version_option(package_name="c3", prog_name="c3")
@click.pass_context
def cli(ctx: click.Context, readonly: bool, color: str, no_mouse: bool, ascii_only: bool, bell: bool, estate_path: Path | None) -> None:
    """c3 — place, fit-check, launch and watch open-weight LLMs on your own GPUs.

    Run with no command for the cockpit; `c3 demo` runs it on a simulated rig.
    """
    ctx.ensure_object(dict)
    ctx.obj.update(readonly=readonly, color=color, no_mouse=no_mouse, bell=bell, ascii=ascii_only)
    if ctx.invoked_subcommand is None:
        from c3.cli.cockpit import run_cockpit

        if estate_path is not None:
            from backend.views.estate_file import planned_pods

            planned_pods(estate_path)  # a bad --file is one error line here, not a stale cockpit
        run_cockpit(readonly=readonly, color=color, no_mouse=no_mouse, demo=False, estate_path=estate_path, bell=bell, ascii=ascii_only)


def fail(error: C3Error) -> None:
    """Print one error line (and a hint) on stderr and exit with the error's code; a failed launch
    phase first shows the last lines of the failing node's output."""
    if isinstance(error, PhaseFailure) and error.tail:
        click.echo(f"c3: last lines from {terminal_safe(error.node, one_line=True)}:", err=True)
        for line in error.tail:
            click.echo(f"  | {terminal_safe(line, one_line=True)}", err=True)
    error_line(error.message, error.hint)
    sys.exit(error.exit_code)


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so the interpreter's final flush cannot hit the closed pipe again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    except OSError:
        pass


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: the command, with everything it prints sanitized (c3.cli.terminal)."""
    with sanitized_output():
        _main(argv)


def _main(argv: list[str] | None) -> None:
    # Non-UTF-8 locales crashed club-3090's helpers (#779); our output has ✓ ⚠ × — in it.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="replace")  # type: ignore[union-attr]
        except (AttributeError, ValueError):
            pass
    try:
        # One settings object for the whole command (backend.actions.session): a bad C3_* value is
        # one usage line here, before anything runs. A help page or --version reads no setting, so
        # it does not pay for building them (pydantic, issue 22): they are then read from the
        # environment on first use, should the flag turn out to be an option's value.
        from backend.actions.session import command_settings

        words = sys.argv[1:] if argv is None else argv
        with command_settings(now=_PAGE_FLAGS.isdisjoint(words)):
            cli.main(args=argv, prog_name="c3", standalone_mode=False)
    except SystemExit:
        # click handles EPIPE itself (`c3 … | head`): it wraps stdout in its pacifying wrapper and
        # exits 1. A reader that stopped early is not our failure: exit 0, quietly.
        if "PacifyFlushWrapper" in type(sys.stdout).__name__:
            _silence_stdout()
            sys.exit(0)
        raise
    except C3Error as error:
        fail(error)
    except click.exceptions.NoArgsIsHelpError as error:
        click.echo(error.ctx.get_help() if error.ctx else str(error))
        sys.exit(2)
    except click.UsageError as error:
        error_line(error.format_message(), f"see `{error.ctx.command_path} --help`" if error.ctx is not None else None)
        sys.exit(2)
    except click.Abort:
        click.echo("c3: aborted", err=True)
        sys.exit(130)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except BrokenPipeError:
        # `c3 gpus | head` closing the pipe is not an error worth a traceback.
        _silence_stdout()
        sys.exit(0)
    except OSError as error:
        # The last net under every file c3 touches in C3_HOME / C3_STATE (a read-only or full file
        # system, a file where a folder should be): one line with the path, exit 3 (environment).
        from backend.errors import os_failure

        fail(os_failure(error, error.filename or "a file", "use"))
    except KeyboardInterrupt:
        click.echo("c3: interrupted", err=True)
        sys.exit(130)
