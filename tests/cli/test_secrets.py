"""Secrets never leave the environment: not on stdout/stderr, not in JSON, not in dry-runs, not in a
file under C3_HOME or C3_STATE.

Every read command and dry-run that exists runs as a real process with HF_TOKEN and the API-key
variables set to unique sentinels; a sentinel appearing anywhere it could be seen fails the test.
"""

from __future__ import annotations

import uuid

import pytest

from tests.cli.cases import RECIPE, SLUG
from tests.cli.harness import base_env, contract_problems, fresh_dirs, run_c3

SECRETS = {name: f"{prefix}{uuid.uuid4().hex}" for name, prefix in (
    ("HF_TOKEN", "hf_SENTINEL"), ("HUGGING_FACE_HUB_TOKEN", "hf_HUBSENTINEL"), ("OPENAI_API_KEY", "sk-SENTINEL"),
    ("VLLM_API_KEY", "vk-SENTINEL"), ("C3_API_KEY", "c3-SENTINEL"),
)}

PROFILE = """name: demo
kind: recipe
recipe: {recipe}
recipe_digest: sha256:0
nodes: [here, there]
base_url: http://127.0.0.1:1/v1
model: Qwen/Qwen3-8B
api_key_env: VLLM_API_KEY
"""

# (argv, must succeed): reads and dry-runs print what they would do, so they are where a secret leaks.
COMMANDS: list[tuple[tuple[str, ...], bool]] = [
    (("gpus", "--json"), True),
    (("catalog", "--json"), True),
    (("catalog", "--fits-on", "0,1", "--json"), True),
    (("fit", SLUG, "--gpus", "0", "--json"), True),
    (("fit", SLUG, "--card", "rtx-3090"), True),
    (("pod", "list", "--json"), True),
    (("pod", "status", "--json"), False),  # Docker is unreachable here: exit 3, still no secret
    (("pod", "validate", "--json"), True),
    (("pod", "up", "chat"), False),
    (("node", "ls", "--json"), True),
    (("recipes", "list", "--json"), True),
    (("recipes", "show", RECIPE, "--json"), True),
    (("recipes", "launch", RECIPE, "--nodes", "here,there", "--dry-run"), True),
    (("recipes", "launch", RECIPE, "--nodes", "here,there", "--dry-run", "--set", "max_model_len=8192"), True),
    (("shard", "start", "--profile", "Qwen/Qwen3-8B", "--nodes", "here,there", "--gpus-per-node", "1", "--backend", "mp", "--vllm", "/bin/true",
      "--dry-run"), True),
    (("pool", "install-service", "--nodes", "here,there", "--dry-run", "--unit-dir", "../units"), True),
    (("recipes", "install-service", "--dry-run", "--unit-dir", "../units"), True),
    (("spark", "install-prereqs", "--dry-run"), None),  # exit depends on this machine's packages
    (("profile", "ls", "--json"), True),
    (("profile", "env", "demo"), True),
    (("profile", "status", "demo", "--json"), None),
]


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    dirs = fresh_dirs(tmp_path_factory.mktemp("secrets") / "base")
    (dirs["home"] / "profiles").mkdir()
    (dirs["home"] / "profiles" / "demo.yaml").write_text(PROFILE.format(recipe=RECIPE))
    return dirs


def _leaks(text: str) -> list[str]:
    return [name for name, value in SECRETS.items() if value in text]


@pytest.mark.parametrize("argv, succeeds", COMMANDS, ids=[" ".join(a) for a, _ in COMMANDS])
def test_no_secret_in_output_or_files(home, argv, succeeds):
    outcome = run_c3(list(argv), home, env=base_env(home, extra=SECRETS), timeout=60)
    assert not contract_problems(outcome, may_write=False), outcome.describe()
    if succeeds is not None:
        assert (outcome.rc == 0) == succeeds, outcome.describe()
    assert not _leaks(outcome.stdout + outcome.stderr), f"secret {_leaks(outcome.stdout + outcome.stderr)} printed\n{outcome.describe()}"
    for folder in (home["home"], home["state"], home["units"]):
        for path in folder.rglob("*") if folder.exists() else []:
            if path.is_file():
                text = path.read_bytes().decode("utf-8", "replace")
                assert not _leaks(text), f"secret {_leaks(text)} written to {path} by c3 {' '.join(argv)}"


def test_dry_runs_name_the_secret_without_its_value(home):
    """The dry-run says a token is passed (so the test above is not vacuous) and shows it redacted."""
    outcome = run_c3(["recipes", "launch", RECIPE, "--nodes", "here,there", "--dry-run"], home, env=base_env(home, extra=SECRETS))
    assert outcome.rc == 0, outcome.describe()
    assert "HF_TOKEN=<redacted>" in outcome.stdout
    env_lines = run_c3(["profile", "env", "demo"], home, env=base_env(home, extra=SECRETS))
    assert 'OPENAI_API_KEY="${VLLM_API_KEY}"' in env_lines.stdout, env_lines.describe()
