"""`c3 spark doctor` and `c3 spark install-prereqs`: the packages vLLM's JIT builds need on a DGX Spark."""

from __future__ import annotations

import sys

import click

from c3.cli.common import echo_line, emit_json, json_option
from c3.cli.terminal import error_line


@click.group()
def spark() -> None:
    """DGX Spark host preparation (native vLLM installs)."""


@spark.command()
@json_option
def doctor(as_json: bool) -> None:
    """Check the packages vLLM's JIT kernel builds need; exit 1 when something is missing."""
    from backend.views.spark import spark_readiness

    report = spark_readiness()
    if as_json:
        emit_json({**report.model_dump(), "ok": report.ok, "missing_apt": report.missing_apt})
    else:
        gpus = ", ".join(report.gpus) or "none found"
        click.echo(f"machine {report.machine}, GPUs: {gpus}" + ("" if report.is_spark else "  (not a DGX Spark; checking anyway)"))
        for item in report.items:
            mark = "✓" if item.present else "×"
            click.echo(f"  {mark} {item.name:<22} {item.detail}")
            if not item.present:
                click.echo(f"      needed for: {item.why}")
        if report.ok:
            click.echo("all prerequisites present")
        elif report.missing_apt:
            click.echo(f"missing: {' '.join(report.missing_apt)} — `c3 spark install-prereqs` installs them")
    sys.exit(0 if report.ok else 1)


@spark.command("install-prereqs")
@click.option("--dry-run", is_flag=True, help="Print the apt-get commands without running them.")
def install_prereqs(dry_run: bool) -> None:
    """Install the missing packages with apt-get (needs root or passwordless sudo)."""
    from backend.actions.install_spark_prereqs import InstallSparkPrereqs

    action = InstallSparkPrereqs()
    report = action.report()
    commands = action.commands()
    if not commands:
        click.echo(action.problems()[0].message)
    elif dry_run:
        for line in action.plan().lines:
            click.echo(line)
    else:
        done = action.run(echo_line)
        if not done.ok:
            error_line(f"{done.message}")
            sys.exit(1)
    others = [i for i in report.items if not i.present and not i.apt]
    for item in others:
        click.echo(f"not installable with apt-get here: {item.name} — {item.detail}")
