"""The recipe schema: a configuration that was run and measured on named hardware.

A recipe pins its image by digest, says which hardware it was measured on and by whom (provenance),
carries the numbers measured there, and lists the overrides known to abort on that hardware. A
recipe is `verified` only with a pinned image, provenance and numbers; any local override demotes a
launched profile to "recipe + local overrides", which shows no verified numbers.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from backend import limits
from backend.envnames import ENV_NAME
from backend.recipes import template
from backend.text import show

RECIPE_ID_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
DIGEST_RE = re.compile(r"(@sha256:[0-9a-f]{64}$)|(^sha256:[0-9a-f]{64}$)")
ParamValue = str | int | float | bool

# A docker image reference (distribution/reference's grammar, lower-case path components): an
# optional registry host[:port]/, path components, an optional :tag and @sha256 digest; or a local
# image id `sha256:…`. Never starts with `-`, so it cannot be read as a `docker run` option.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
IMAGE_RE = re.compile(
    rf"sha256:[0-9a-f]{{64}}|(?:{_LABEL}(?:\.{_LABEL})*(?::[0-9]{{1,5}})?/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?"
)


def image_problem(image: object) -> str | None:
    """Why `image` is not a docker image reference (None when it is one)."""
    if not isinstance(image, str) or len(image) > 255 or not IMAGE_RE.fullmatch(image):
        return (f"image `{show(image, 80)}` is not an image reference "
                "(REPO[:TAG][@sha256:…] or a local image id sha256:…; it may not start with `-`)")
    return None


def port_problem(port: object, what: str = "port") -> str | None:
    """Why `port` is not a TCP port, an integer 1–65535 (None when it is one)."""
    if not limits.is_port(port):
        return f"{what} `{show(port, 40)}` is not a TCP port (an integer 1–65535)"
    return None


# Weight formats whose kernels need a compute-capability floor: NVFP4's FP4 tensor cores are Blackwell's
# (sm 10.0 and up); older cards have no FP4 GEMM.
QUANT_MIN_SM = {"nvfp4": "10.0"}


def sm_key(sm: str) -> tuple[int, int]:
    """`12.1` → (12, 1), for comparing compute capabilities."""
    major, _, minor = sm.partition(".")
    return int(major), int(minor or 0)


class Hardware(BaseModel):
    """The hardware a recipe was measured on (and is meant for)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """Short key known-abort rules refer to, e.g. `2x-gb10`."""
    description: str
    """Human description, e.g. `2× NVIDIA DGX Spark (GB10, 128 GB unified) over 200 GbE`."""
    gpu: str
    """GPU model per node, e.g. `NVIDIA GB10`."""
    gpus_per_node: int = Field(default=1, ge=0)
    """GPUs each rank gets, picked by device id among its node's free GPUs (0: none, CPU-only test hardware)."""
    interconnect: str | None = None
    """How the nodes talk (`200 GbE RoCE`, `loopback`), when more than one."""
    min_sm: str | None = Field(default=None, pattern=r"^[0-9]{1,2}\.[0-9]{1,2}$")
    """Lowest compute capability (`major.minor`) a rank's GPUs may have; `quantization` may raise it."""
    arch: list[str] = Field(default_factory=list)
    """Card families the recipe runs on (cards.csv `arch`: Ampere, Ada Lovelace, Hopper, Blackwell); empty: any."""
    min_memory_mib: int | None = Field(default=None, ge=1)
    """Memory each GPU must report (nvidia-smi `memory.total`, MiB); a card that reports none (GB10) is not judged."""
    quantization: str | None = None
    """Weight format with a hardware floor (`QUANT_MIN_SM`: `nvfp4` needs compute capability ≥ 10.0)."""

    def required_sm(self) -> tuple[str, str] | None:
        """The compute capability the GPUs need and why, or None when any will do."""
        floors = []
        if self.min_sm:
            floors.append((self.min_sm, "the recipe's min_sm"))
        quant = QUANT_MIN_SM.get((self.quantization or "").lower())
        if quant:
            floors.append((quant, f"{self.quantization} weights"))
        return max(floors, key=lambda f: sm_key(f[0])) if floors else None


class Provenance(BaseModel):
    """Who measured the recipe, when, on what, and where to read about it."""

    model_config = ConfigDict(extra="forbid")

    measured_by: str
    """Person, project or publication that ran it."""
    measured_on: str | None = None
    """Date of the measurement (ISO `YYYY-MM-DD` or `YYYY-MM`), when known."""
    hardware: str
    """The hardware as the source describes it."""
    source: str | None = None
    """Link to the public source of the numbers."""
    tool: str | None = None
    """Benchmark tool and version, when the source names it."""
    notes: str | None = None
    """Anything a reader needs to judge the numbers (single run, what was not pinned, …)."""


class Measured(BaseModel):
    """Numbers measured with this recipe on its hardware."""

    model_config = ConfigDict(extra="forbid")

    tokens_per_s: float | None = None
    """Decode throughput of one stream, tokens/s."""
    aggregate_tokens_per_s: float | None = None
    """Decode throughput summed over `concurrency` streams, tokens/s."""
    concurrency: int | None = None
    """Concurrent requests behind `aggregate_tokens_per_s`."""
    ttft_ms: float | None = None
    """Time to first token, milliseconds."""
    startup_s: float | None = None
    """Seconds from start to the first answered request."""


class KnownAbort(BaseModel):
    """An override value known to make the engine abort on given hardware."""

    model_config = ConfigDict(extra="forbid")

    key: str
    """The parameter (a key of `defaults`, or `image`)."""
    op: Literal[">", ">=", "<", "<=", "==", "!="] = "=="
    """How the override compares with `value` to be refused."""
    value: ParamValue
    """The threshold or the exact bad value."""
    hardware: str
    """Hardware id this applies to (`*` for any)."""
    why: str
    """What happens (the abort message or the mechanism), shown when refusing."""
    source: str | None = None
    """Where the abort was reported."""

    def matches(self, value: ParamValue) -> bool:
        """True when `value` falls in the refused range."""
        try:
            a, b = (float(value), float(self.value)) if self.op not in ("==", "!=") else (value, self.value)
        except (TypeError, ValueError):
            a, b = str(value), str(self.value)
        if self.op in ("==", "!="):
            same = str(a).lower() == str(b).lower()
            return same if self.op == "==" else not same
        return {">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b}[self.op]  # type: ignore[operator]


class DockerOptions(BaseModel):
    """How each rank's container is run."""

    model_config = ConfigDict(extra="forbid")

    network_host: bool = True
    """`--network host`: ranks find each other and rank 0 serves on the node's own address."""
    ipc_host: bool = True
    """`--ipc host` (NCCL shared memory)."""
    gpus: str | None = "all"
    """`--gpus` value; None for CPU-only hardware (the stub engine)."""
    shm_size: str | None = None
    """`--shm-size`, e.g. `16g`."""
    volumes: list[str] = Field(default_factory=list)
    """`-v` specs, e.g. `~/.cache/huggingface:/root/.cache/huggingface`."""
    extra_args: list[str] = Field(default_factory=list)
    """Other `docker run` flags, verbatim."""


class Recipe(BaseModel):
    """A launchable, measured configuration."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=RECIPE_ID_PATTERN, max_length=60)
    """Recipe id; also the default profile name and container name part."""
    title: str = ""
    """One line for lists."""
    model: str
    """HF repo id (or path) the engine serves."""
    model_revision: str | None = None
    """HF commit the numbers were measured with, when known."""
    served_model_name: str | None = None
    """Name clients use (OPENAI_MODEL); defaults to `model`."""
    engine: Literal["vllm", "sglang", "llamacpp", "custom"] = "vllm"
    """Engine family."""
    image: str
    """Container image, pinned `repo@sha256:…` (or a local image id `sha256:…`); a bare tag only in an unverified recipe."""
    nodes: int = Field(ge=1)
    """How many nodes the recipe runs on (rank 0, the first, serves the API)."""
    hardware: Hardware
    """What it was measured on."""
    defaults: dict[str, ParamValue] = Field(default_factory=dict)
    """Parameters substituted into the command (`{name}`); `--set name=value` overrides them. `port` is required."""
    command: list[str]
    """Rank 0's container arguments (after the image), with `{placeholders}`."""
    worker_command: list[str] | None = None
    """Ranks ≥ 1 (None: the same as `command`). Extra placeholders: rank, nnodes, head_address, node_address."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment for every rank (`{placeholders}` allowed); secret (env file, redacted) unless in `public_env`."""
    public_env: list[str] = Field(default_factory=list)
    """Names in `env` that may go on the command line and be shown (never a credential-looking one)."""
    api_key_env: str | None = "C3_API_KEY"
    """Variable in c3's environment whose value becomes the engine's API key (VLLM_API_KEY), sent in a 0600 env file."""
    health_path: str = "/health"
    """Path the watchdog and status probe on rank 0 (vLLM, SGLang and llama.cpp answer /health without the API key)."""
    startup_grace_s: int = Field(default=900, ge=0)
    """Seconds a fresh launch may take to answer before the watchdog counts failures."""
    docker: DockerOptions = Field(default_factory=DockerOptions)
    """`docker run` options."""
    provenance: Provenance | None = None
    """Who measured it; None for an untested recipe."""
    measured: Measured | None = None
    """The numbers; None when nobody published any."""
    known_aborts: list[KnownAbort] = Field(default_factory=list)
    """Overrides refused before any node is touched."""
    verified: bool = False
    """True only with a pinned image, provenance and numbers."""
    source_file: str | None = Field(default=None, exclude=True)
    """Where the recipe was read from (not part of the recipe)."""

    @model_validator(mode="after")
    def _check(self) -> Recipe:
        bad = [k for k in self.env if not ENV_NAME.fullmatch(k)]
        if bad:
            raise ValueError(f"env name {bad[0][:60]!r} is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)")
        if self.api_key_env is not None and not ENV_NAME.fullmatch(self.api_key_env):
            raise ValueError(f"api_key_env {self.api_key_env[:60]!r} is not a valid variable name")
        if "port" not in self.defaults:
            raise ValueError("defaults must set `port` (rank 0 serves the API there)")
        for problem in (port_problem(self.defaults["port"], "defaults.port"), image_problem(self.image)):
            if problem:
                raise ValueError(problem)
        self._check_templates()
        if self.verified:
            if not self.image_pinned:
                raise ValueError("a verified recipe must pin its image by digest (repo@sha256:… or sha256:…)")
            if self.provenance is None or self.measured is None:
                raise ValueError("a verified recipe needs provenance and measured numbers")
        return self

    def _check_templates(self) -> None:
        # Every placeholder is checked here, when the recipe is read, so a hostile template never
        # gets as far as a launch (or a dry run); render() fills with the same closed set.
        names = set(self.defaults) | template.BUILTIN_FIELDS
        texts = [("command", self.command), ("worker_command", self.worker_command or [])]
        for where, parts in texts:
            for i, part in enumerate(parts):
                try:
                    template.check(part, names)
                except ValueError as exc:
                    raise ValueError(f"{where}[{i}]: {exc}") from None
        for key, value in self.env.items():
            try:
                template.check(value, names)
            except ValueError as exc:
                raise ValueError(f"env {key}: {exc}") from None

    @property
    def image_pinned(self) -> bool:
        """True when the image is referenced by digest."""
        return bool(DIGEST_RE.search(self.image))

    @property
    def model_name(self) -> str:
        """What clients put in `model`."""
        return self.served_model_name or self.model

    def digest(self) -> str:
        """sha256 of the recipe's content: a profile records it to tell an edited recipe apart."""
        body = self.model_dump(mode="json", exclude={"source_file"})
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()

    def aborts_for(self, key: str, value: ParamValue) -> KnownAbort | None:
        """The known abort an override would hit on this recipe's hardware, if any."""
        for rule in self.known_aborts:
            if rule.key == key and rule.hardware in ("*", self.hardware.id) and rule.matches(value):
                return rule
        return None
