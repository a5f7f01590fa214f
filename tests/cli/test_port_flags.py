"""The TCP-port range has one place, `backend.limits` (issue 25): every port flag of the CLI and `--bind`
refuse what the backend refuses, in the backend's words, and take what it takes. c3 reaches the rule through
the front door (`backend.models.ports`), never with a range of its own."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from backend import limits
from backend.errors import UsageError
from c3.cli import COMMANDS, cli
from c3.cli.pool import parse_bind

BAD = ["0", "65536", "8²", "-1", "", "99999", "٨٠٠٠", "1e3", "+80", "8000.0", "000000080"]
"""Out of range, not ASCII digits (a superscript, Arabic-Indic digits that int() would take), signs, floats."""
GOOD = ["1", "80", "8000", "65535"]


def _commands(group: click.Group, ctx: click.Context, path: str = "c3") -> list[tuple[str, click.Command]]:
    found = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None:
            continue
        found.append((f"{path} {name}", command))
        if isinstance(command, click.Group):
            found += _commands(command, ctx, f"{path} {name}")
    return found


def _port_options() -> list[tuple[str, click.Option]]:
    with click.Context(cli) as ctx:
        commands = _commands(cli, ctx)
    assert len(commands) > len(COMMANDS)
    return [(where, p) for where, c in commands for p in c.params if isinstance(p, click.Option) and p.name and "port" in p.name]


def test_every_port_flag_uses_the_backends_rule():
    options = _port_options()
    assert len(options) >= 8, options  # pod create/edit --port, serve --port, shard --port/--ray-port/…, demo --gateway-port, pool --port
    ranged = [f"{where} {o.opts[0]}" for where, o in options if isinstance(o.type, click.IntRange)]
    assert ranged == [], f"port flags with a range of their own: {ranged}"
    assert all(o.type.name == "port" for _, o in options), [(w, o.opts[0], o.type) for w, o in options]


@pytest.mark.parametrize("text", BAD)
def test_the_cli_and_bind_refuse_what_the_backend_refuses_in_its_words(text):
    with pytest.raises(ValueError) as refused:
        limits.port_text(text)
    said = str(refused.value)
    assert "1" in said and "65535" in said, said
    for where, option in _port_options():
        with pytest.raises(click.BadParameter) as bad:
            option.type.convert(text, option, None)
        assert said in bad.value.message, (where, bad.value.message)
    with pytest.raises(UsageError) as bind:
        parse_bind(f"127.0.0.1:{text}")
    assert said in bind.value.message, bind.value.message


@pytest.mark.parametrize("text", GOOD)
def test_the_cli_and_bind_take_what_the_backend_takes(text):
    number = limits.port_text(text)
    assert number == int(text) and limits.is_port(number)
    for _, option in _port_options():
        assert option.type.convert(text, option, None) == number
    assert parse_bind(f"127.0.0.1:{text}") == ("127.0.0.1", number)


def test_a_refused_port_is_one_error_line_with_exit_2():
    result = CliRunner().invoke(cli, ["pod", "create", "x", "--gpus", "0", "--slug", "custom/stub", "--port", "8²"])
    with pytest.raises(ValueError) as refused:
        limits.port_text("8²")
    assert result.exit_code == 2 and str(refused.value) in result.output, result.output
