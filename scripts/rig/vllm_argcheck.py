"""Parse command lines with vLLM's own `vllm serve` argument parser (run in the vLLM venv; no model, no boot).

    echo '[{"name": "vllm/qwen3-8b", "argv": ["vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "8"]}]' \\
        | VENV/bin/python scripts/rig/vllm_argcheck.py

Builds the parser exactly as `vllm` does (`FlexibleArgumentParser` → `serve` subparser →
`make_arg_parser`), parses each argv after its leading `vllm`, runs the serve command's own
`validate` (vLLM's `validate_parsed_serve_args`). Prints one JSON object: name → {"ok", "error", "stage"}.
It stops there: building `EngineArgs` from the namespace resolves the model on the hub (offline here), so
what a flag's value means for a given model is the boot tests' business, not this check's.
A flag vLLM does not know, a wrong value type or choice, or a validation rule it breaks is `ok: false`
with vLLM's own message.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys


def build_parser():
    import vllm.entrypoints.cli.serve as serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    commands = {}
    for cmd in serve.cmd_init():
        cmd.subparser_init(subparsers).set_defaults(dispatch_function=cmd.cmd)
        commands[cmd.name] = cmd
    return parser, commands


def check(parser, commands, argv: list[str]) -> dict:
    args = argv[1:] if argv[:1] == ["vllm"] else argv
    stage = "parse"
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = parser.parse_args(args)
            stage = "validate"
            commands[ns.subparser].validate(ns)
    except SystemExit as exc:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        return {"ok": False, "stage": stage, "error": (lines[-1] if lines else f"exit {exc.code}")}
    except Exception as exc:  # noqa: BLE001 - vLLM's own validation raises plain exceptions
        return {"ok": False, "stage": stage, "error": f"{type(exc).__name__}: {exc}"}
    return {"ok": True, "stage": "done", "error": ""}


def main() -> int:
    items = json.load(sys.stdin)
    parser, commands = build_parser()
    results = {item["name"]: check(parser, commands, item["argv"]) for item in items}
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
