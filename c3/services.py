"""The facade the cockpit calls — from workers only — and the plain objects it hands back.

Every method of `Services` may block (NVML, docker-py, files, HTTP, SSH), so the app never calls one
on the event loop: screens start a thread worker, the worker calls the facade and posts a message
back. Two exceptions by design: `subscribe`'s callback runs in the live hub's thread and only posts
(GPU and pod changes arrive pushed, as `LiveUpdate`s), and `freshness()` never blocks. The clock is *not* part of the facade (the app asks it on the event loop every second), it is
passed to the app separately.

One implementation: `c3.services_real.RealServices` over the backend packages — on a real rig, or
on the simulated world of `c3 demo` (`backend/sim/`), which is also what the cockpit's snapshot
tests and the README's screenshots run on. Test-only doubles live under `tests/cockpit/`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol

from backend.actions.base import Action, Outcome, Progress
from backend.actions.inputs import NewNode as NewNode  # re-exported: the screens build these
from backend.actions.inputs import NewPod as NewPod
from backend.actions.inputs import PodEdit as PodEdit
from backend.actions.inputs import PoolRouter as PoolRouter
from backend.actions.inputs import ProcessSignal as ProcessSignal
from backend.actions.inputs import RecipeLaunch as RecipeLaunch
from backend.actions.inputs import ShardStop as ShardStop

if TYPE_CHECKING:  # pydantic models cost ~0.3 s to import: not before the first frame
    from backend.live.engine_metrics import EngineMetrics
    from backend.live.history import HistoryView
    from backend.models import CatalogEntry, FitReport, GpuSnapshot
    from backend.runtime.gpu_processes import GpuProcessRow
    from backend.views.cache import NodeCache
    from backend.views.gateway import GatewayStatus
    from backend.views.node_pods import NodePods
    from backend.views.shard import LiveShard
    from backend.views.try_pod import TryResult

PodRunState = Literal["down", "booting", "serving", "failed", "unknown"]
PlacementVerdict = Literal["ok", "mismatch", "unknown"]

# The writes' own types (backend/actions), under the names the screens know them by.
WriteRequest = NewPod | NewNode | RecipeLaunch | PoolRouter | ProcessSignal | PodEdit | ShardStop
"""What a form or key hands a write (`Services.make_plan`'s request)."""
BootProgress = Progress
"""One step of a running write (a boot's phase; for a recipe launch `pod` is the profile)."""
WriteResult = Outcome
"""What a write did, shown to the user whatever happened."""


@dataclass(frozen=True)
class PodState:
    """One pod of the estate as the cockpit shows it: plan, run state and verified placement."""

    name: str
    slug: str
    port: int
    gpus: tuple[int, ...]
    state: PodRunState = "down"
    placement: PlacementVerdict = "unknown"
    placement_detail: str = "not running"
    """What is wrong (mismatch) or why it is unknown; empty when placed."""
    actual_gpus: tuple[int, ...] | None = None
    """GPUs the pod's processes really run on (None when not verified)."""
    metrics: EngineMetrics | None = None
    """The engine's own /metrics, derived (None while not serving or before the first scrape)."""
    metrics_error: str | None = None
    """Why the last /metrics scrape failed, one line."""
    restarts: int = 0
    """How many times the runtime restarted its container after the engine exited (Docker's RestartCount)."""


@dataclass(frozen=True)
class WritePlan:
    """The exact plan a confirm gate shows before any write, and the action that runs it."""

    action: Action
    title: str
    lines: tuple[str, ...]
    """The plan, line by line, exactly as it will be executed."""
    problems: tuple[str, ...] = ()
    """Why the plan cannot run now (shown; the confirm button stays disabled)."""
    warnings: tuple[str, ...] = ()
    """What to know before confirming (shown; Confirm stays enabled)."""
    destructive: bool = False
    wide: bool = False
    confirm: tuple[str, str] | None = None
    """(key, label): the gate confirms only with this distinct choice, never `y` (a foreign process)."""

    @property
    def pod(self) -> str | None:
        """The pod — or the node, or the profile — the write acts on."""
        return self.action.target

    @property
    def pods(self) -> tuple[str, ...]:
        """Pods whose boot progress the write ends (a stop, a stop-all, a removal)."""
        return self.action.affects

    @property
    def request(self) -> WriteRequest | None:
        """The form's input the write was built from, if any (kept while screens and tests read it)."""
        return getattr(self.action, "request", None)


@dataclass(frozen=True)
class NodeGpuRow:
    """One GPU of a node as its `nvidia-smi` (or, in the demo, the simulated rig) reports it."""

    index: int
    name: str
    total_mib: int | None = None
    used_mib: int | None = None


@dataclass(frozen=True)
class NodeRow:
    """One registered node as the Nodes mode lists it."""

    name: str
    host: str
    ssh: str
    local: bool
    reachable: bool | None = None
    """SSH answered (always True for this machine); None: not probed (yet)."""
    detail: str = ""
    """Why not reachable, or what kind of node it is."""
    endpoint_ok: bool | None = None
    """The node's `--host` URL answered /health or /v1/models; None: not probed."""
    endpoint_detail: str = ""
    gpus: tuple[NodeGpuRow, ...] = ()
    gpu_error: str | None = None
    """Why there is no GPU list (no nvidia-smi, node unreachable)."""
    ssh_key: str | None = None


@dataclass(frozen=True)
class PoolBackendRow:
    """One backend of a running pool router."""

    node: str
    url: str
    state: str
    """`up`, `loading`, `down` or `unknown`."""
    healthy: bool
    draining: bool = False
    suspect: bool = False
    in_flight: int = 0
    requests: int = 0
    errors: int = 0
    p50_ms: float | None = None
    p99_ms: float | None = None
    last_error: str | None = None


@dataclass(frozen=True)
class PoolRow:
    """One running `c3 pool serve` router."""

    bind: str
    sticky: str
    pid: int
    reachable: bool = True
    error: str | None = None
    pins: int = 0
    hit_ratio: float | None = None
    """Sticky hits over keyed requests (None before any keyed request)."""
    uptime_s: float = 0.0
    backends: tuple[PoolBackendRow, ...] = ()


@dataclass(frozen=True)
class ProfileRow:
    """A launched recipe profile; the active one is what `c3 profile status` acts on."""

    name: str
    recipe: str
    nodes: tuple[str, ...]
    base_url: str
    stopped: bool = False
    """Deliberately stopped (the watchdog leaves it)."""
    active: bool = False
    """It is the active profile (`profiles()` lists the others too)."""
    status: str = ""
    """`verified recipe`, `recipe (unverified)`, `recipe + local overrides` or `recipe missing`."""


@dataclass(frozen=True)
class RecipeRow:
    """One recipe as the Recipes mode lists it."""

    id: str
    hardware: str
    nodes: int
    image: str
    verified: bool
    summary: str = ""
    provenance: str = ""
    measured: tuple[str, ...] = ()


@dataclass(frozen=True)
class PodDetails:
    """Everything the details modal shows about one pod."""

    pod: PodState
    facts: tuple[tuple[str, str], ...] = ()
    fit: FitReport | None = None


@dataclass(frozen=True)
class GpuReading:
    """The GPUs as the live hub read them, pushed when what the GPU panels show changes."""

    snapshots: tuple[GpuSnapshot, ...]
    """Every GPU, index order."""
    util: dict[int, tuple[float, ...]]
    """Recent util % per GPU, oldest first (the sparklines)."""
    mem: dict[int, tuple[float, ...]]
    """Recent memory % per GPU, oldest first."""
    taken_at: datetime | None
    """When the newest of these readings was taken."""
    error: str | None = None
    """Why the GPU readings stopped (the last good ones are these), or None."""


@dataclass(frozen=True)
class PodsReading:
    """Every pod of the estate as the live hub sees it, pushed when what the pod view shows changes."""

    pods: tuple[PodState, ...]
    """Estate order."""
    taken_at: datetime
    """When the snapshot they come from was assembled."""
    error: str | None = None
    """Why the runtime stopped answering (the pods are the last good reading), or None."""


@dataclass(frozen=True)
class LiveUpdate:
    """What changed on screen, from one live-hub snapshot: the GPU part, the pod part, or both."""

    gpus: GpuReading | None = None
    pods: PodsReading | None = None


@dataclass(frozen=True)
class Freshness:
    """When the live hub last read each part (changed or not): the freshness badges age from these."""

    gpus_at: datetime | None = None
    pods_at: datetime | None = None


@dataclass
class History:
    """Bounded per-GPU history of util % and memory % for the sparklines (a few minutes at 1 Hz)."""

    maxlen: int = 180
    util: dict[int, list[float]] = field(default_factory=dict)
    mem: dict[int, list[float]] = field(default_factory=dict)

    def add(self, snapshots: list[GpuSnapshot]) -> None:
        """Append one reading per GPU, dropping the oldest beyond `maxlen`."""
        for snap in snapshots:
            index = snap.gpu.index
            total = snap.gpu.total_mib or 0
            mem_pct = 100.0 * (snap.used_mib or 0) / total if total else 0.0
            for series, value in ((self.util, float(snap.util_pct or 0)), (self.mem, mem_pct)):
                values = series.setdefault(index, [])
                values.append(value)
                if len(values) > self.maxlen:
                    del values[: len(values) - self.maxlen]


ProgressCallback = Callable[[BootProgress], object]


class Services(Protocol):
    """What the cockpit needs from the world. Every method may block: call from workers only."""

    readonly: bool
    """Refuse every write (`c3 --readonly`)."""
    label: str
    """Where the data comes from, for the title bar (e.g. `local`, `demo rig`)."""
    startup_notice: str | None
    """A line the cockpit shows once, when the facade is ready (where the demo's gateway answers), or None."""

    def gpu_snapshots(self) -> list[GpuSnapshot]:
        """A fresh reading of every GPU, index order."""

    def gpu_history(self) -> dict[int, list[tuple[float, float]]]:
        """Recent (util %, memory %) samples per GPU, oldest first, to seed the sparklines."""

    def pod_states(self) -> list[PodState]:
        """Every pod of the estate with its run state and verified placement."""

    def catalog(self) -> list[CatalogEntry]:
        """The catalog (built-in entries plus the user's)."""

    def fit(self, slug: str, gpus: tuple[int, ...]) -> FitReport:
        """The fit-check of a slug on exactly those host GPUs."""

    def propose_port(self, slug: str) -> int:
        """A free host port for a new pod of this slug."""

    def port_problem(self, text: str, taken: Mapping[int, str]) -> str | None:
        """Why a new pod cannot take the port typed as `text`: not a port, another pod's (`taken`: port →
        pod), or something on this machine listens on it (the estate's rule, backend/estate/ports.py)."""

    def make_plan(self, key: str, pod: str | None = None, request: WriteRequest | None = None) -> WritePlan:
        """The write registered as `key` (`backend.actions.registry`) on that pod/node/profile or form
        input, planned: its exact plan and the problems that would refuse it now (a recipe launch's
        plan is its dry-run, secrets by name only)."""

    def check(self, plan: WritePlan) -> list[str]:
        """Re-validate a plan just before executing it; empty means go."""

    def execute(self, plan: WritePlan, progress: ProgressCallback) -> WriteResult:
        """Run a confirmed plan's action (raises `backend.errors.C3Error` on refusal). A recipe launch
        reports each step as a `BootProgress` whose `pod` is the profile and `phase` the step."""

    def pod_logs(self, name: str, tail: int, timestamps: bool = False) -> list[str]:
        """The last `tail` lines of a pod's engine log. `timestamps`: each line the runtime recorded a
        time for starts with it (RFC 3339, UTC) and a space; lines without one come as they are."""

    def pod_details(self, name: str) -> PodDetails:
        """Facts about one pod for the details modal."""

    def try_pod(self, name: str, prompt: str, max_tokens: int) -> TryResult:
        """One streaming test prompt to a running pod (`c3 pod try`): the answer, TTFT, tokens and
        tokens/s (raises `backend.errors.C3Error` when the pod does not run or its engine does not answer)."""

    def shell_command(self, name: str) -> list[str]:
        """The command that opens a shell in a running pod's container (`docker exec -it …`; on the simulated
        runtime a shell in the pod's sandbox); raises `backend.errors.C3Error` for a stopped pod."""

    def nodes(self) -> list[NodeRow]:
        """The node registry, with reachability where probed."""

    def node_caches(self) -> list[NodeCache]:
        """Every registered node's model-weight cache (`c3 cache ls`): models and sizes, or why a node
        could not be read; bounded (the scan stops itself, the SSH run has a timeout)."""

    def node_pods(self) -> list[NodePods]:
        """The c3 pods of every registered node that is not this machine, read over their SSH targets
        (`c3 pod status --all-nodes`); a node that cannot be reached is its own row, never raised."""

    def recipes(self) -> list[RecipeRow] | None:
        """The recipe catalogue; None when this build has no recipes backend."""

    def override_problems(self, recipe: str, overrides: tuple[str, ...]) -> list[str]:
        """Why these `key=value` overrides of a recipe are wrong (unparsable, unknown key, wrong type,
        known to abort on the recipe's hardware), one line each; empty when they are fine."""

    def registered_nodes(self) -> list[NodeRow]:
        """The node registry alone (no probing: fast), for the launch modal's node picker."""

    def pools(self) -> list[PoolRow]:
        """Running pool routers on this machine with per-backend health and counters."""

    def shards(self) -> list[LiveShard]:
        """Shards this machine's `c3 shard start` runs (or ran in the last hour), each rank's state read
        from its node now over SSH (a killed rank shows as dead, naming its node), with a headline."""

    def gateways(self) -> list[GatewayStatus]:
        """Running `c3 gateway serve` processes on this machine, as each last wrote its status file: per pod
        its state, queue (held requests and why), requests in flight, model names, the last swap."""

    def active_profile(self) -> ProfileRow | None:
        """The active recipe profile, if any."""

    def profiles(self) -> list[ProfileRow]:
        """Every launched profile, by name, the active one marked (`c3 profile ls`)."""

    def set_live(self, active: bool) -> None:
        """Pause (False) or resume (True) background live sources while nobody looks at them."""

    def history(self) -> HistoryView:
        """What the live hub recorded over the last minutes: per GPU util/memory/power, per serving
        pod running/waiting requests, KV use and generation tok/s (recorded under modals too)."""

    def gpu_processes(self) -> list[GpuProcessRow]:
        """Every compute process on the GPUs: pid, GPU it really uses, memory, its pod or none
        (foreign), user and command."""

    def subscribe(self, on_update: Callable[[LiveUpdate], None]) -> Callable[[], None] | None:
        """Call `on_update(update)` — from a live-hub thread, so it must only post — whenever what the
        GPU panels or the pod view show changes (a reading that changes nothing on screen is not
        pushed); returns the unsubscribe function, or None when nothing can be pushed (no live hub:
        then the cockpit polls)."""

    def close(self) -> None:
        """The cockpit is leaving: stop the live hub's threads (pods keep running; the demo stops its stubs)."""

    def freshness(self) -> Freshness:
        """When the live hub last read the GPUs and the pods, changed or not. Never blocks (what the
        hub's threads last recorded), so the event loop may call it."""
