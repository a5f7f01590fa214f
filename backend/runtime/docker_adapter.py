"""The Docker adapter: pods as containers via docker-py (the only module that imports it).

Container `c3-<pod>`, labels `io.c3.pod|slug|estate`, the pod's host port bound to the engine's port,
the host HF cache mounted, HF_TOKEN passed from the caller's environment (into the container's
environment only: never in argv, output or logs), GPUs pinned by device (`gpu_mode.binding`).

Restart policy: a container is created with `no` and switched to `unless-stopped` once it has served
(`mark_healthy`). A boot failure (OOM at start-up, a bad flag) therefore stops and is reported with its
log lines, instead of becoming a silent restart loop (club-3090 #535); a pod that did serve comes back
after a crash or a reboot, and `pod down` (which removes the container) is never undone by Docker.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backend.errors import EnvironmentProblem, Refused
from backend.runtime import cgroup
from backend.runtime.gpu_mode import ModeDecision, binding, detect_mode
from backend.runtime.models import MAX_EXEC_OUTPUT, ExecResult, LaunchSpec, ResourceUse, Workload
from backend.settings import current

LABEL_POD = "io.c3.pod"
LABEL_SLUG = "io.c3.slug"
LABEL_ESTATE = "io.c3.estate"
LABEL_GPUS = "io.c3.gpus"
CONTAINER_HF_CACHE = "/root/.cache/huggingface"
# A container created this recently and never started belongs to an `up` still in progress.
STARTING_GRACE_S = 120.0
CONTAINER_GPU_REGISTRY = "/c3-registry"
# Containers whose stats are read side by side: each answer takes the daemon about a second.
USAGE_THREADS = 4


def container_name(pod: str) -> str:
    """`c3-<pod>`."""
    return f"c3-{pod}"


def host_hf_cache() -> Path:
    """The host's HF cache (`$HF_HOME` when set, else `~/.cache/huggingface`)."""
    home = current().hf_home
    return home.expanduser() if home else Path.home() / ".cache" / "huggingface"


def _where() -> str:
    return current().docker_host or "unix:///var/run/docker.sock"


def connect(timeout: float = 30.0) -> Any:
    """A docker-py client that answered a ping; EnvironmentProblem (exit 3) when the daemon does not."""
    try:
        import docker
        from docker.errors import DockerException
    except ImportError as error:  # pragma: no cover - docker is a hard dependency
        raise EnvironmentProblem(f"docker-py is not installed ({error})") from None
    try:
        client = docker.from_env(timeout=timeout)  # type: ignore[arg-type]  # stubs say int; requests takes a float
        client.ping()
    except (DockerException, OSError) as error:
        raise EnvironmentProblem(
            f"the Docker daemon is unreachable at {_where()}: {_reason(error)}",
            hint="start dockerd (or fix DOCKER_HOST), then try again",
        ) from None
    return client


def _reason(error: BaseException) -> str:
    """A short cause instead of docker-py's nested exception text."""
    text = str(error)
    for needle, short in (
        ("No such file", "no socket there"),
        ("FileNotFoundError", "no socket there"),
        ("Connection refused", "connection refused"),
        ("Permission denied", "permission denied (is this user in the docker group?)"),
        ("timed out", "timed out"),
    ):
        if needle in text:
            return short
    return (text.splitlines() or [type(error).__name__])[0][:160]


def gpu_registry() -> Path | None:
    """The GPU registration directory (`C3_GPU_REGISTRY`), shared with `env`-mode containers.

    Only the simulator and the test rig set it: a stand-in engine in the container writes which GPUs
    it holds there, and the (fake) NVML reads it — the container-side half of placement in tests.
    """
    return current().gpu_registry


def create_kwargs(spec: LaunchSpec, mode: ModeDecision, secret_env: Mapping[str, str], hf_cache: Path, registry: Path | None = None) -> dict[str, Any]:
    """The `containers.create` keyword arguments for a launch (pure: unit-tested without a daemon)."""
    from docker.types import DeviceRequest

    gpu = binding(spec.gpu_mode, spec.gpu_uuids, spec.gpu_indices, mode.cdi_names)
    env = {**spec.env, **gpu.env, **dict(secret_env)}
    kwargs: dict[str, Any] = {
        "image": spec.image,
        "name": container_name(spec.pod),
        "entrypoint": list(spec.argv),
        "labels": {LABEL_POD: spec.pod, LABEL_SLUG: spec.slug, LABEL_ESTATE: spec.estate, LABEL_GPUS: ",".join(spec.gpu_uuids)},
        "environment": env,
        "ports": {f"{spec.container_port}/tcp": spec.host_port},
        "volumes": {str(hf_cache): {"bind": CONTAINER_HF_CACHE, "mode": "rw"}},
        "restart_policy": {"Name": "no"},
        "detach": True,
    }
    if spec.gpu_mode == "env" and registry is not None:
        kwargs["volumes"][str(registry)] = {"bind": CONTAINER_GPU_REGISTRY, "mode": "rw"}
        env["C3_GPU_REGISTRY"] = CONTAINER_GPU_REGISTRY
    if gpu.device_requests:
        kwargs["device_requests"] = [
            DeviceRequest(driver=r["Driver"], device_ids=r["DeviceIDs"], capabilities=r.get("Capabilities") or []) for r in gpu.device_requests
        ]
    if spec.engine in {"vllm", "sglang"}:
        # Tensor-parallel workers talk over shared memory; Docker's 64 MiB default breaks NCCL.
        kwargs["shm_size"] = "16g"
    return kwargs


class DockerRuntime:
    """PodRuntime over a Docker daemon."""

    kind = "docker"

    def __init__(self, client: Any | None = None, *, simulated_probe: bool = False) -> None:
        self._client = client
        self._simulated = simulated_probe

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = connect()
        return self._client

    def gpu_mode(self, forced: str | None = None) -> ModeDecision:
        info = None
        if not forced and not self._simulated:
            info = self._call(self.client.info)
        return detect_mode(info, simulated=self._simulated, forced=forced)

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from docker.errors import APIError, DockerException

        try:
            return fn(*args, **kwargs)
        except APIError:
            raise
        except (DockerException, OSError) as error:
            raise EnvironmentProblem(f"the Docker daemon stopped answering at {_where()}: {str(error)[:160]}") from None

    def _container(self, pod: str) -> Any | None:
        from docker.errors import NotFound

        try:
            return self._call(self.client.containers.get, container_name(pod))
        except NotFound:
            return None

    def launch(self, spec: LaunchSpec, secret_env: Mapping[str, str]) -> Workload:
        from docker.errors import APIError, ImageNotFound

        old = self._container(spec.pod)
        if old is not None:
            if old.status == "running":
                raise Refused(f"pod {spec.pod} is already running (container {old.name})", hint=f"`c3 pod down {spec.pod}` first")
            if old.status == "created" and _age_s(old) < STARTING_GRACE_S:
                # Created but not yet started: another `up` of this pod is between its create and its start.
                raise Refused(f"pod {spec.pod} is being started by another `c3 pod up`", hint=_api_hint("conflict already in use"))
            try:
                self._call(old.remove, force=True)
            except APIError as error:  # NotFound included: another `up` removed it first
                if getattr(error, "status_code", None) != 404:
                    raise _refusal(spec.pod, error) from None
        try:
            self._call(self.client.images.get, spec.image)
        except ImageNotFound:
            self._pull(spec.image)
        hf = host_hf_cache()
        hf.mkdir(parents=True, exist_ok=True)
        kwargs = create_kwargs(spec, self.gpu_mode(spec.gpu_mode), secret_env, hf, gpu_registry())
        try:
            container = self._call(self.client.containers.create, **kwargs)
        except APIError as error:
            # Nothing of ours to clean up: a name conflict means another `up` of this pod won the race.
            raise _refusal(spec.pod, error) from None
        try:
            self._call(container.start)
            container.reload()
        except APIError as error:
            with contextlib.suppress(APIError):
                self._call(container.remove, force=True)
            raise _refusal(spec.pod, error) from None
        return _workload(container)

    def _pull(self, image: str) -> None:
        from docker.errors import APIError

        repo, _, tag = image.rpartition(":") if ":" in image.split("/")[-1] else (image, "", "latest")
        try:
            self._call(self.client.images.pull, repo, tag=tag or "latest")
        except APIError as error:
            raise EnvironmentProblem(f"image {image} is not here and could not be pulled: {str(error)[:200]}", hint=f"`docker pull {image}` by hand") from None

    def workload(self, pod: str) -> Workload:
        container = self._container(pod)
        return _workload(container) if container is not None else Workload(pod=pod, status="absent")

    def workloads(self) -> dict[str, Workload]:
        # ignore_removed: docker-py inspects each listed container; one removed in between (another
        # `c3 down`, a test tearing down) must not turn a listing into a NotFound traceback.
        found = self._call(self.client.containers.list, all=True, filters={"label": LABEL_POD}, ignore_removed=True)
        result: dict[str, Workload] = {}
        for container in found:
            workload = _workload(container)
            result[workload.pod] = workload
        return result

    def mark_healthy(self, pod: str) -> None:
        container = self._container(pod)
        if container is not None:
            self._call(container.update, restart_policy={"Name": "unless-stopped"})

    def stop(self, pod: str, timeout: float = 30.0) -> bool:
        container = self._container(pod)
        if container is None:
            return False
        if container.status == "running":
            self._call(container.stop, timeout=int(timeout))
        self._call(container.remove, force=True)
        return True

    def logs(self, pod: str, tail: int = 100, timestamps: bool = False) -> str:
        container = self._container(pod)
        if container is None:
            return ""
        # Docker's own receive time per line (RFC 3339, nanoseconds, UTC), as `docker logs -t` shows it.
        raw: bytes = self._call(container.logs, tail=tail, timestamps=timestamps)
        return raw.decode("utf-8", errors="replace")

    def follow_logs(self, pod: str, tail: int = 100) -> Iterator[str]:
        container = self._container(pod)
        if container is None:
            return
        buffer = b""
        for chunk in container.logs(stream=True, follow=True, tail=tail):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                yield line.decode("utf-8", errors="replace")
        if buffer:
            yield buffer.decode("utf-8", errors="replace")

    def exec_in(self, pod: str, argv: list[str], timeout: float) -> ExecResult:
        """`docker exec` without a terminal: stdout and stderr together. The wait is bounded by a thread
        (docker-py reads an exec's output with no timeout); the command itself is not killed when it runs
        longer (Docker has no exec kill)."""
        import threading

        from docker.errors import APIError, DockerException, NotFound

        client = connect(timeout=timeout)
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                container = client.containers.get(container_name(pod))
                outcome["result"] = container.exec_run(argv, stdout=True, stderr=True, stdin=False, tty=False, demux=False)
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread below
                outcome["error"] = error

        worker = threading.Thread(target=run, name=f"exec-{pod}", daemon=True)
        worker.start()
        worker.join(timeout)
        try:
            if worker.is_alive():
                raise TimeoutError
            if "error" in outcome:
                raise outcome["error"]
            code, raw = outcome["result"]
        except NotFound:
            raise Refused(f"pod {pod} has no container", hint=f"`c3 pod up {pod}` first") from None
        except APIError as error:
            raise _refusal(pod, error) from None
        except (DockerException, OSError) as error:
            if isinstance(error, TimeoutError) or "timed out" in str(error).lower():
                raise Refused(f"the command did not finish within {timeout:g} s in pod {pod} (it may still run in the container)",
                              hint="give it a larger timeout, or run a command that ends") from None
            raise EnvironmentProblem(f"the Docker daemon stopped answering at {_where()}: {str(error)[:160]}") from None
        finally:
            if not worker.is_alive():
                client.close()
        raw = raw or b""
        return ExecResult(exit_code=int(code if code is not None else -1), output=raw[:MAX_EXEC_OUTPUT].decode("utf-8", errors="replace"),
                          truncated=len(raw) > MAX_EXEC_OUTPUT)

    def usage(self, pods: Iterable[str]) -> dict[str, ResourceUse]:
        """One `docker stats --no-stream` reading per running pod. The daemon takes about a second per
        container to get its two CPU samples, so the pods are read side by side (at most USAGE_THREADS)."""
        from concurrent.futures import ThreadPoolExecutor

        from docker.errors import DockerException

        def one(pod: str) -> ResourceUse | None:
            try:
                container = self._container(pod)
                if container is None or container.status != "running":
                    return None
                stats = self._call(container.stats, stream=False)
            except (DockerException, EnvironmentProblem):
                return None  # gone in between, or the daemon stopped answering: no reading, not an error
            limit = int(((container.attrs or {}).get("HostConfig") or {}).get("Memory") or 0)
            return usage_from_stats(stats, limit or None)

        names = list(dict.fromkeys(pods))
        if not names:
            return {}
        with ThreadPoolExecutor(max_workers=min(USAGE_THREADS, len(names)), thread_name_prefix="docker-stats") as pool:
            readings = dict(zip(names, pool.map(one, names), strict=True))
        return {pod: use for pod, use in readings.items() if use is not None}

    def owners(self, pids: Iterable[int]) -> dict[int, str | None]:
        pids = list(pids)
        if not pids:
            return {}
        by_id = {c.id: c.labels.get(LABEL_POD) for c in self._call(self.client.containers.list, filters={"label": LABEL_POD}, ignore_removed=True)}
        result: dict[int, str | None] = {}
        for pid in pids:
            cid = cgroup.container_id_of_pid(pid)
            result[pid] = by_id.get(cid) if cid else None
        return result

    def events(self) -> Iterator[dict[str, Any]]:
        """Container events of c3 pods (blocking generator; the live hub runs it in a thread)."""
        events: Iterator[dict[str, Any]] = self.client.events(decode=True, filters={"type": "container", "label": LABEL_POD})
        return events


def usage_from_stats(stats: dict[str, Any], limit: int | None = None) -> ResourceUse | None:
    """CPU % and memory from one Engine API stats document, computed as the `docker stats` CLI does:
    CPU = container CPU time delta / host CPU time delta × online CPUs × 100 (between `precpu_stats` and
    `cpu_stats`); memory = usage less inactive file cache (`total_inactive_file` on cgroup v1,
    `inactive_file` on v2). None when the document has no memory usage (the container stopped)."""
    memory = stats.get("memory_stats") or {}
    used = memory.get("usage")
    if not isinstance(used, int):
        return None
    extra = memory.get("stats") or {}
    cache = extra.get("total_inactive_file") if "total_inactive_file" in extra else extra.get("inactive_file")
    if isinstance(cache, int) and cache < used:
        used -= cache
    cpu, before = stats.get("cpu_stats") or {}, stats.get("precpu_stats") or {}
    pct: float | None = None
    if before.get("system_cpu_usage"):  # a one-shot reading has no earlier sample: no rate to give
        cpu_delta = (cpu.get("cpu_usage") or {}).get("total_usage", 0) - (before.get("cpu_usage") or {}).get("total_usage", 0)
        system_delta = cpu.get("system_cpu_usage", 0) - before["system_cpu_usage"]
        cpus = cpu.get("online_cpus") or len((cpu.get("cpu_usage") or {}).get("percpu_usage") or ()) or 1
        pct = round(cpu_delta / system_delta * cpus * 100, 1) if cpu_delta > 0 and system_delta > 0 else 0.0
    return ResourceUse(cpu_pct=pct, mem_bytes=used, mem_limit_bytes=limit)


def _workload(container: Any) -> Workload:
    labels = container.labels or {}
    state = container.attrs.get("State", {}) if container.attrs else {}
    status = container.status if container.status in {"running", "exited", "created"} else ("running" if state.get("Running") else "exited")
    port = None
    for bindings in (container.attrs.get("HostConfig", {}).get("PortBindings") or {}).values():
        for b in bindings or []:
            if b.get("HostPort"):
                port = int(b["HostPort"])
    pid = state.get("Pid") or 0
    return Workload(
        pod=labels.get(LABEL_POD, container.name.removeprefix("c3-")),
        status=status,
        id=container.id,
        slug=labels.get(LABEL_SLUG),
        estate=labels.get(LABEL_ESTATE),
        host_port=port,
        exit_code=state.get("ExitCode") if status == "exited" else None,
        pids=(pid,) if pid else (),
        gpu_uuids=tuple(u for u in labels.get(LABEL_GPUS, "").split(",") if u),
        restart_count=int((container.attrs or {}).get("RestartCount") or 0),
    )


def _age_s(container: Any) -> float:
    """Seconds since the container was created (0 when the daemon's timestamp cannot be read)."""
    created = str(container.attrs.get("Created") or "")
    try:
        # Docker gives nanoseconds ("2026-11-29T19:05:30.305055639Z"); fromisoformat takes microseconds.
        stamp = datetime.fromisoformat(re.sub(r"(\.\d{6})\d*", r"\1", created).replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return max(0.0, (datetime.now(UTC) - stamp).total_seconds())


def _refusal(pod: str, error: Exception) -> Refused:
    explanation = str(getattr(error, "explanation", None) or error)
    return Refused(f"Docker refused to start pod {pod}: {explanation[:300]}", hint=_api_hint(explanation))


def _api_hint(explanation: str) -> str | None:
    text = explanation.lower()
    if "port is already allocated" in text or "address already in use" in text:
        return "another process holds that host port; pick another with `c3 pod create … --port`"
    if "conflict" in text and "already in use" in text:
        return "another `c3 pod up` of this pod is starting it right now"
    if "could not select device driver" in text or "cdi" in text:
        return "the daemon cannot hand out GPUs this way; try --gpu-mode (nvidia|cdi) or install nvidia-container-toolkit"
    return None
