"""What one gateway is configured with, and the small interface it drives pods through."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from backend.limits import ANY_PORT, PORT_MAX

DEFAULT_PORT = 8012
"""Next to the pool router's 8011, so both can run on one host with their defaults."""


class GatewayConfig(BaseModel):
    """One gateway's settings (the `c3 gateway serve` flags)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    host: str = "127.0.0.1"
    """Address to listen on (loopback unless the operator says otherwise)."""
    port: int = Field(default=DEFAULT_PORT, ge=ANY_PORT, le=PORT_MAX)
    """Port to listen on (0: any free port, for tests; `--bind` refuses it)."""
    idle_ttl_s: float = Field(default=0.0, ge=0)
    """Stop a pod this gateway started once nobody used it for this long; 0 never stops one."""
    queue_limit: int = Field(default=64, ge=1)
    """Requests held per pod while it starts; one more is 429 with Retry-After."""
    boot_timeout_s: float = Field(default=900.0, gt=0)
    """How long a start may take to serve (`pod up --timeout`); then the held requests get 503."""
    body_limit: int = Field(default=8 * 1024 * 1024, ge=1024)
    """Largest request body (the pool's `--retry-body-limit`): the gateway holds it whole to read `model`."""
    body_timeout_s: float = Field(default=60.0, gt=0)
    """Seconds between two pieces of a request body (then 408, close), as the pool."""
    idle_timeout_s: float = Field(default=75.0, gt=0)
    """An idle keep-alive connection, or a request head, may take this long (then closed), as the pool."""
    upstream_timeout_s: float = Field(default=300.0, gt=0)
    """Seconds a pod may take to send its response head (then 504)."""
    min_residency_s: float = Field(default=30.0, ge=0)
    """A pod runs at least this long before the gateway stops it to start another on its GPUs (no thrash)."""
    swap_wait_s: float = Field(default=120.0, ge=0)
    """How long a request is held while its pod's GPUs are held by pods that may not be stopped yet (in flight,
    minimum residency); then 503 with Retry-After. 0: answered 429 with Retry-After at once."""
    failure_hold_s: float = Field(default=10.0, ge=0)
    """After a failed start, requests for that pod get the same 503 for this long instead of another boot."""
    api_key: SecretStr | None = None
    """When set, every request needs `Authorization: Bearer KEY` (compared in constant time; never shown)."""
    engine_key: SecretStr | None = None
    """`VLLM_API_KEY`: sent to the pods in place of the client's credential when a gateway key is set."""
    state_dir: Path | None = None
    """Where the status file goes (`$C3_STATE/gateway`); None writes none (tests)."""


@dataclass(frozen=True)
class GatewayPod:
    """A pod as the gateway routes to it."""

    name: str
    port: int
    slug: str
    models: tuple[str, ...] = ()
    """The names the engine serves (catalog model id, the slug's short name) and the slug itself."""
    serves: tuple[str, ...] = ()
    """The names the engine itself answers to; a request naming the pod or the slug is sent with the first
    (empty for a custom entry, whose engine decides: its `model` is then sent as the client wrote it)."""
    gpus: tuple[int, ...] = ()
    """Host GPU indices it is pinned to (pods whose sets intersect never run at once)."""
    on_demand: bool = False
    """`on_demand: true` in the estate: the gateway may stop it to make room for another pod."""
    fit_verdict: str | None = None
    """The fit-check's verdict on its GPUs (None: not priced)."""
    fit_reasons: tuple[str, ...] = ()
    """The fit-check's own words behind that verdict."""
    sleep_mode: bool = False
    """A vLLM pod launched with sleep mode (`sleep_mode: true`): the gateway may put it to sleep instead of stopping it."""
    total_gib: tuple[float, ...] = ()
    """Per GPU of `gpus`, the fit's CUDA-visible total (empty: not priced; then nothing sleeps for it or beside it)."""
    need_gib: tuple[float, ...] = ()
    """Per GPU, what it takes awake: the fit's budget (vLLM reserves total × utilization at boot)."""
    sleeping_gib: tuple[float, ...] = ()
    """Per GPU, what it still holds asleep (level 1): `backend.fit.vllm.sleeping_gib`; empty unless `sleep_mode`."""


def route_names(pods: list[GatewayPod]) -> dict[str, list[str]]:
    """Every name a request's `model` may say, in the order `GET /v1/models` lists them, with the pods it
    routes to: each pod's own name first (it is the only pod that name reaches), then each model name a
    pod serves, with the pods serving it in estate order."""
    by_name: dict[str, list[str]] = {}
    for pod in pods:
        by_name.setdefault(pod.name, []).insert(0, pod.name)
    for pod in pods:
        for model in pod.models:
            if pod.name not in by_name.setdefault(model, []):
                by_name[model].append(pod.name)
    return by_name


@dataclass(frozen=True)
class StartResult:
    """How a start through `pod up`'s action ended."""

    ok: bool
    started: bool
    """This start launched the engine (False: it was already running, started by someone else)."""
    elapsed_s: float = 0.0
    detail: str = ""
    log_tail: tuple[str, ...] = field(default_factory=tuple)


class PodControl(Protocol):
    """The estate as the gateway sees it. Every call blocks (the gateway runs them in threads)."""

    def pods(self) -> list[GatewayPod]:
        """The estate's pods, in file order."""

    def running(self) -> set[str]:
        """Names of the pods whose engine runs now."""

    def start(self, name: str, timeout_s: float, asleep: tuple[str, ...] = ()) -> StartResult:
        """Boot the pod through `c3 pod up`'s action (every gate, pinning, the readiness wait). `asleep`: pods on
        its GPUs this gateway put to sleep, whose claim does not block (their footprint is the VRAM gate's)."""

    def stop(self, name: str) -> None:
        """Stop the pod through `c3 pod down`'s action."""

    def sleep(self, name: str) -> None:
        """Put the pod's engine to sleep (level 1); raises C3Error when it is not asleep afterwards."""

    def wake(self, name: str) -> StartResult:
        """Wake the pod's engine; ok when it says it no longer sleeps."""

    def sleeping(self, name: str) -> bool:
        """Whether the pod's engine says it sleeps (False when it cannot say: no sleep routes, no answer)."""
