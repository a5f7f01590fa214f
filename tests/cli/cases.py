"""The invocations the sweep runs: per command, its help, no arguments, unknown options, and every
option and argument fed junk of the wrong kind; plus broken homes (malformed files c3 reads).

Nothing here may block or touch the outside: registered node names are only used where the command
fails fast or is a dry run; unit folders always point into the test's temp dir; `spark
install-prereqs` always gets --dry-run (it would run apt-get as root); the cockpit (`c3`, `c3 demo`)
only gets arguments click rejects before it starts; `pool serve` only unregistered nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import click

from tests.cli.harness import groups, leaf_commands

SLUG = "vllm/qwen3-8b"
RECIPE = "spark2-vllm-qwen3-235b-a22b-gptq-int4"

# A few fixed values per kind; the Hypothesis test (test_fuzz.py) draws further ones at random.
INT_JUNK = ["abc", "-1", "70000", "99999999999999999999999", ""]
FLOAT_JUNK = ["abc", "-1", "nan", "1e400"]
TEXT_JUNK = ["", "ünï€ø∂-名前", "x" * 400, "../../etc/passwd"]
CHOICE_JUNK = ["bogus"]
# Relative to the files folder (the subprocess's cwd).
PATH_JUNK = ["does-not-exist.yaml", "adir", "binary.bin", "unreadable.txt", "empty.txt/child", "bad.yaml"]
# Options that name a structured input file also get malformed and wrongly shaped documents.
STRUCTURED = {"--file": ["list.yaml", "scalar.json", "empty.txt"], "--config": ["bad.json", "scalar.json", "list.yaml", "empty.txt"]}

# Commands that start something long-lived or outside the sandbox when given valid input: only their
# help and click-level rejections run.
BLOCKING = {("demo",), ("gateway", "serve")}


@dataclass(frozen=True)
class Case:
    """One invocation and what it is allowed to do."""

    id: str
    argv: tuple[str, ...]
    variant: str = "seeded"
    """Which home: `seeded`, or a broken one (see BROKEN_HOMES)."""
    may_write: bool = False
    """A success may write under C3_HOME (create/add/set); a failure never may."""
    rig: str | None = "demo"
    extra_env: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    real: bool = False
    """Run as a fresh process through the `c3` console script (else forked from the warm interpreter):
    each command's `--help` is, so every command's import and the console-script path stay proven."""


def plausible(path: tuple[str, ...], param: click.Parameter) -> list[str]:
    """A value that gets past click for a required parameter (never a registered node)."""
    name = param.name or ""
    if name in ("slug",):
        return [SLUG]
    if name == "recipe_id":
        return [RECIPE]
    if name == "name" and path[0] == "pod":
        return ["chat"]
    if name == "pairs":
        return ["max_model_len=4096"]
    if name == "keys":
        return ["max_model_len"]
    if name == "gpus":
        return ["0"]
    if name == "host":
        return ["http://127.0.0.1:9"]
    if name == "ssh":
        return ["u@127.0.0.1:9"]
    if name == "profile":
        return ["Qwen/Qwen3-8B"]
    return ["nosuch"]


def _option_flag(param: click.Option) -> str:
    longs = [o for o in param.opts if o.startswith("--")]
    return longs[0] if longs else param.opts[0]


def required_args(path: tuple[str, ...], cmd: click.Command, *, skip: str | None = None) -> list[str]:
    """Arguments that satisfy the command's required parameters (except `skip`)."""
    argv: list[str] = []
    for param in cmd.params:
        if param.name == skip or not param.required:
            continue
        values = plausible(path, param)
        if isinstance(param, click.Option):
            argv += [_option_flag(param), values[0]]
        else:
            argv += values
    return argv


PATH_OPTIONS = ("--file", "--unit-dir", "--config", "--ssh-key", "--wheelhouse")


def _inside(value: str) -> str:
    """A path value made relative to the case's own folder (absolute or ~ paths could reach the host)."""
    return "./" + value.lstrip("/~") if value.startswith(("/", "~")) else value


def guard(path: tuple[str, ...], argv: list[str]) -> list[str]:
    """Keep an invocation inside the sandbox whatever junk it carries."""
    safe: list[str] = []
    previous = ""
    for token in argv:
        if previous in PATH_OPTIONS:
            token = _inside(token)
        elif token.startswith(tuple(f"{o}=" for o in PATH_OPTIONS)):
            option, _, value = token.partition("=")
            token = f"{option}={_inside(value)}"
        safe.append(token)
        previous = token
    if path == ("spark", "install-prereqs") and "--dry-run" not in safe:
        safe.append("--dry-run")  # it would run apt-get as root
    if path in {("recipes", "install-service"), ("pool", "install-service")}:
        safe += ["--unit-dir", "../units"]  # the last --unit-dir wins: never systemd's own folder
    return safe


def junk_for(param: click.Parameter) -> list[str]:
    kind = param.type
    if isinstance(kind, click.Choice):
        return CHOICE_JUNK
    # click itself bounds a range type, so fewer values there; a plain int/float reaches c3's code.
    if isinstance(kind, click.IntRange):
        return ["abc", "-1", "99999999999999999999999"]
    if isinstance(kind, click.FloatRange):
        return ["abc", "-1", "nan"]
    if isinstance(kind, click.types.IntParamType):
        return INT_JUNK
    if isinstance(kind, click.types.FloatParamType):
        return FLOAT_JUNK
    if isinstance(kind, click.Path | click.File):
        return PATH_JUNK
    return TEXT_JUNK


def command_cases() -> list[Case]:
    cases: list[Case] = [
        Case("c3 :: --help", ("--help",), real=True),
        Case("c3 :: --version", ("--version",)),
        Case("c3 :: unknown command", ("no-such-command",)),
        Case("c3 :: unknown option", ("--no-such-option",)),
        Case("c3 :: bad --color", ("--color", "bogus", "gpus")),
    ]
    for group in groups():
        label = " ".join(group)
        cases += [
            Case(f"{label} :: no args", group),
            Case(f"{label} :: unknown subcommand", (*group, "no-such-subcommand")),
            Case(f"{label} :: unknown option", (*group, "--no-such-option")),
        ]
    for path, cmd in leaf_commands():
        label = " ".join(path)
        writes = path in {("pod", "create"), ("pod", "edit"), ("node", "add"), ("profile", "set"), ("profile", "unset"), ("node", "trust")}
        cases += [
            Case(f"{label} :: --help", (*path, "--help"), real=True),
            Case(f"{label} :: unknown option", (*path, *required_args(path, cmd), "--no-such-option")),
        ]
        if path in BLOCKING:
            cases.append(Case(f"{label} :: bad choice", (*path, "--color", "bogus")))
            continue
        cases.append(Case(f"{label} :: no args", tuple(guard(path, list(path))), may_write=writes))
        cases.append(Case(f"{label} :: plausible", tuple(guard(path, [*path, *required_args(path, cmd)])), may_write=writes))
        if not any(isinstance(p, click.Argument) and p.nargs == -1 for p in cmd.params):
            cases.append(Case(f"{label} :: extra argument", tuple(guard(path, [*path, *required_args(path, cmd), "extra-arg"]))))
        for param in cmd.params:
            if isinstance(param, click.Option) and (param.is_flag or param.count):
                continue
            flag = _option_flag(param) if isinstance(param, click.Option) else None
            base = required_args(path, cmd, skip=param.name)
            for value in junk_for(param) + STRUCTURED.get(flag or "", []):
                shown = value if len(value) < 20 else value[:12] + f"…({len(value)})"
                pname = flag or f"<{param.name}>"
                argv = [*path, *base, flag, value] if flag else [*path, value, *base]
                cases.append(Case(f"{label} :: {pname}={shown!r}", tuple(guard(path, argv)), may_write=writes))
    return cases


# Broken homes: each replaces or adds one file c3 reads before doing anything.
BROKEN_HOMES: dict[str, dict[str, bytes | None]] = {
    "estate-malformed-yaml": {"estate.yml": b"estate: [unclosed\n  - : :\n"},
    "estate-wrong-shape": {"estate.yml": b"- 1\n- 2\n"},
    "estate-bad-version": {"estate.yml": b"schema_version: 99\nestate: []\n"},
    "estate-binary": {"estate.yml": b"\xff\xfe\x00\x81\xc3\x28"},
    "estate-is-dir": {"estate.yml/x": b"x"},
    "nodes-malformed-json": {"nodes.json": b'{"nodes": [ }'},
    "nodes-wrong-shape": {"nodes.json": b'{"nodes": [{"name": "UPPER CASE"}]}'},
    "catalog-malformed": {"catalog.d/mine.yaml": b"slug: [unclosed\n"},
    "catalog-wrong-shape": {"catalog.d/mine.yaml": b"slug: vllm/x\nengine: nosuch\ntp: -3\n"},
    "recipes-malformed": {"recipes.d/mine.yaml": b"id: [unclosed\n"},
    "profiles-malformed": {"profiles/broken.yaml": b"model: [unclosed\n"},
}

ESTATE_READERS: list[tuple[str, ...]] = [
    ("pod", "list"), ("pod", "status"), ("pod", "validate"), ("pod", "create", "new", "--gpus", "1", "--slug", SLUG), ("pod", "rm", "chat"),
    ("up",), ("down",), ("pod", "up", "chat"),
]
NODE_READERS: list[tuple[str, ...]] = [
    ("node", "ls"), ("node", "status"), ("node", "add", "n3", "--host", "http://127.0.0.1:9", "--ssh", "u@127.0.0.1:9"),
    ("recipes", "launch", RECIPE, "--nodes", "here,there", "--dry-run"), ("pool", "status"),
    ("shard", "start", "--profile", "Qwen/Qwen3-8B", "--nodes", "here,there", "--dry-run"),
]
CATALOG_READERS: list[tuple[str, ...]] = [
    ("gpus",), ("catalog",), ("catalog", "--fits-on", "0"), ("fit", SLUG, "--gpus", "0"), ("pod", "validate"),
    ("pod", "create", "new", "--gpus", "1", "--slug", SLUG),
]
# Which commands read the file each broken home breaks.
READERS: dict[str, list[tuple[str, ...]]] = {
    "estate": ESTATE_READERS, "nodes": NODE_READERS, "catalog": CATALOG_READERS,
    "recipes": [("recipes", "list"), ("recipes", "show", RECIPE), ("recipes", "launch", RECIPE, "--nodes", "here,there", "--dry-run")],
    "profiles": [("profile", "ls"), ("profile", "status"), ("profile", "env", "broken"),
                 ("shard", "start", "--profile", "broken", "--nodes", "here,there", "--dry-run")],
}


def home_cases() -> list[Case]:
    cases = [Case(f"{' '.join(argv)} :: home {variant}", argv, variant=variant)
             for variant in BROKEN_HOMES for argv in READERS[variant.split("-")[0]]]
    rigs = {"rig-missing": "does-not-exist.yaml", "rig-malformed": "bad.yaml", "rig-wrong-shape": "list.yaml", "rig-binary": "binary.bin",
            "rig-dir": "adir", "no-rig-no-nvml": None}
    for label, rig in rigs.items():
        for argv in [("gpus",), ("catalog", "--fits-on", "0"), ("fit", SLUG, "--gpus", "0"), ("pod", "validate"),
                     ("pod", "create", "new", "--gpus", "1", "--slug", SLUG), ("pod", "status")]:
            cases.append(Case(f"{' '.join(argv)} :: {label}", argv, rig=rig))
    cases.append(Case("gpus :: C3_RUNTIME junk", ("pod", "status"), extra_env=(("C3_RUNTIME", "bogus"),)))
    cases.append(Case("pod status :: C3_HOME is a file", ("pod", "status"), extra_env=(("C3_HOME", "empty.txt"),)))
    cases.append(Case("pod create :: C3_HOME is a file", ("pod", "create", "new", "--gpus", "1", "--slug", SLUG),
                      extra_env=(("C3_HOME", "empty.txt"),)))
    cases.append(Case("node add :: C3_HOME is a file", ("node", "add", "n3", "--host", "http://127.0.0.1:9", "--ssh", "u@127.0.0.1:9"),
                      extra_env=(("C3_HOME", "empty.txt"),)))
    return cases


def all_cases() -> list[Case]:
    cases = command_cases() + home_cases()
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    return cases
