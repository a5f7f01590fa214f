"""`c3 pool install-service` carries every `pool serve` flag the user gives into the unit's ExecStart."""

from __future__ import annotations

import shlex

import click
import pytest
from click.testing import CliRunner

from backend.pool.service import render_unit, verify_unit
from c3.cli.pool import install_service, serve
from tests.pool.conftest import register

# A non-default value for every tuning flag of `pool serve`, each unlike its default and the others.
GIVEN = {
    "--cache-blocks": "4096",
    "--cache-min-match": "0.25",
    "--cache-balance-abs": "3",
    "--cache-balance-rel": "2.5",
    "--probe-interval": "0.75",
    "--probe-timeout": "1.5",
    "--drain-timeout": "45",
    "--load-factor": "1.6",
    "--pin-ttl": "7200",
    "--upstream-timeout": "120.5",
    "--stream-timeout": "30",
    "--write-timeout": "25",
    "--max-response-time": "1800",
    "--body-timeout": "20",
    "--max-body-time": "300",
    "--idle-timeout": "40",
    "--retry-body-limit": "1000",
    "--max-buffered-bytes": "50000000",
    "--hot-key-share": "0.3",
    "--hot-key-window": "500",
    "--hot-key-min": "7",
}
WORDS = {"--route": "cache", "--cache-load": "in-flight", "--kv-events": "a=tcp://127.0.0.1:5557,b=tcp://127.0.0.1:5558"}
"""The tuning flags that take a word, not a number."""


def _options(command: click.Command) -> dict[str, click.Option]:
    return {p.name: p for p in command.params if isinstance(p, click.Option)}


def _exec_start_args(text: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    argv = shlex.split(line.removeprefix("ExecStart="))
    return argv[argv.index("serve") + 1 :]


def _install(*args: str):
    register("a", "http://127.0.0.1:1")
    register("b", "http://127.0.0.1:2")
    result = CliRunner().invoke(install_service, ["--nodes", "a,b", "--bind", ":8125", *args, "--dry-run"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_install_service_accepts_every_serve_option_with_the_same_defaults():
    serve_opts, install_opts = _options(serve), _options(install_service)
    assert set(serve_opts) <= set(install_opts)
    assert set(install_opts) - set(serve_opts) == {"unit_dir", "dry_run"}
    for name, option in serve_opts.items():
        assert install_opts[name].opts == option.opts and install_opts[name].default == option.default, name
    # GIVEN covers every tuning flag serve has (a new serve flag must be added here, and so is tested).
    assert {max(o.opts, key=len) for n, o in serve_opts.items() if n not in {"nodes", "bind", "sticky"}} == set(GIVEN) | set(WORDS)


def test_every_given_value_reaches_exec_start_and_serve_parses_it_back(require_service):
    args = [part for flag, value in {**WORDS, **GIVEN}.items() for part in (flag, value)]
    out = _install("--sticky", "header:x-conv", *args)
    text = out[out.index("# Written by") :]
    exec_args = _exec_start_args(text)
    for flag, value in {**WORDS, **GIVEN}.items():
        assert exec_args[exec_args.index(flag) + 1] == value, (flag, exec_args)
    assert "TimeoutStopSec=55" in text  # derived from the given --drain-timeout 45
    # What systemd will run is a valid `pool serve` command line with exactly the values given.
    ctx = serve.make_context("serve", exec_args)
    for flag, value in GIVEN.items():
        name = flag.removeprefix("--").replace("-", "_")
        assert ctx.params[name] == pytest.approx(float(value)), flag
    assert ctx.params["route"] == "cache" and ctx.params["kv_events"] == WORDS["--kv-events"]
    assert ctx.params["sticky"] == "header:x-conv" and ctx.params["nodes"] == "a,b" and ctx.params["bind"] == ":8125"
    ok, output = verify_unit(text, "c3-pool-8125.service")
    require_service("systemd-analyze", ok is not None, output)
    assert ok, output
    assert "# systemd-analyze verify: ok" in out


def test_defaults_stay_out_of_the_unit_but_the_client_time_limits_are_always_written():
    out = _install("--upstream-timeout", "60")
    exec_args = _exec_start_args(out)
    assert exec_args[exec_args.index("--upstream-timeout") + 1] == "60"
    assert exec_args[exec_args.index("--drain-timeout") + 1] == "30"
    assert exec_args[exec_args.index("--body-timeout") + 1] == "60"
    assert exec_args[exec_args.index("--idle-timeout") + 1] == "75"
    assert exec_args[exec_args.index("--stream-timeout") + 1] == "60"
    assert exec_args[exec_args.index("--write-timeout") + 1] == "60"
    assert exec_args[exec_args.index("--max-body-time") + 1] == "600"
    assert exec_args[exec_args.index("--max-response-time") + 1] == "3600"
    always = {"--upstream-timeout", "--drain-timeout", "--body-timeout", "--idle-timeout", "--stream-timeout", "--write-timeout",
              "--max-body-time", "--max-response-time"}
    assert not set(exec_args) & (set(GIVEN) - always) and "--route" not in exec_args
    # Passing a flag at its default value still pins it: the user asked for it explicitly.
    pinned = _exec_start_args(_install("--hot-key-min", "20"))
    assert pinned[pinned.index("--hot-key-min") + 1] == "20"


def test_render_unit_writes_values_exactly_and_rejects_a_non_flag():
    text = render_unit(["a"], ":8011", "auto", 8011, options={"--pin-ttl": 1234567.5, "--hot-key-window": 300, "--drain-timeout": 0.5})
    args = _exec_start_args(text)
    assert args[args.index("--pin-ttl") + 1] == "1234567.5" and args[args.index("--hot-key-window") + 1] == "300"
    assert args.count("--drain-timeout") == 1 and args[args.index("--drain-timeout") + 1] == "0.5"
    assert "TimeoutStopSec=10" in text
    with pytest.raises(ValueError):
        render_unit(["a"], ":8011", "auto", 8011, options={"upstream-timeout": 1.0})
