"""Run the gateway in the foreground (`c3 gateway serve`): one OpenAI endpoint for the estate's pods,
starting a stopped pod on demand through `c3 pod up`'s own action (`BootPods`: every gate, device
pinning, the placement check, the readiness wait) and stopping idle ones it started through `StopPod`."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, ProgressSink, ignore_progress, problems_of
from backend.actions.registry import register
from backend.actions.workspace import Workspace
from backend.errors import C3Error, UsageError

LOG_LINES = 5
"""Engine log lines a failed start's 503 carries."""
KEY_FILE_MAX = 4096


def read_key_file(path: Path) -> str:
    """The API key in `path`: a regular file only its owner can read (0600), one line; UsageError otherwise."""
    from backend.userfiles import read_text

    text = read_text(path, what="gateway API key file", limit=KEY_FILE_MAX)
    mode = os.stat(path).st_mode
    if stat.S_IMODE(mode) & 0o077:
        raise UsageError(f"the API key file {path} can be read by others (mode {stat.S_IMODE(mode):o})", hint=f"chmod 600 {path}")
    key = text.strip()
    if not key or "\n" in key or any(ord(c) < 0x21 or ord(c) == 0x7F for c in key):
        raise UsageError(f"the API key file {path} must hold one key on one line", hint="printable characters, no spaces")
    return key


def gateway_pods(ws: Workspace, pods: list[Any], fits: dict[str, Any] | None = None) -> list[Any]:
    """The estate's pods as the gateway routes to them: the names each engine serves, its GPUs, on demand,
    and (when `fits` has it) the fit-check's verdict on its GPUs."""
    from backend.fit.vllm import sleeping_gib
    from backend.gateway.config import GatewayPod
    from backend.runtime.engines import served_names

    catalog = ws.catalog()
    out = []
    for pod in pods:
        try:
            entry = catalog.get(pod.slug)
        except C3Error:
            entry = None
        names = served_names(entry) if entry is not None else []
        serves = tuple(names) if entry is not None and entry.engine != "custom" and entry.model else ()
        fit = (fits or {}).get(pod.name)
        sleeps = pod.sleep_mode and entry is not None and entry.engine == "vllm"
        ranks = list(fit.gpus) if fit is not None and len(fit.gpus) == len(pod.gpus) else []
        out.append(GatewayPod(pod.name, pod.port, pod.slug, tuple(dict.fromkeys([*names, pod.slug])), serves, gpus=tuple(pod.gpus),
                              on_demand=pod.on_demand, fit_verdict=fit.verdict if fit is not None else None,
                              fit_reasons=tuple(fit.reasons) if fit is not None else (), sleep_mode=sleeps,
                              total_gib=tuple(r.total_gib for r in ranks), need_gib=tuple(r.budget_gib for r in ranks),
                              sleeping_gib=tuple(sleeping_gib(r) for r in ranks) if sleeps else ()))
    return out


def litellm_config_text(ws: Workspace, url: str, key_env: str) -> str:
    """`c3 gateway litellm-config`: the LiteLLM proxy config for every name the gateway routes (no key in it);
    Refused when the estate plans no pod."""
    from backend.errors import Refused
    from backend.gateway.litellm import litellm_config

    pods = ws.pods()
    if not pods:
        raise Refused(f"the estate file {ws.estate_path} plans no pod: the gateway would route nothing",
                      hint="c3 pod create NAME --gpus 0 --slug SLUG [--on-demand]")
    return litellm_config(gateway_pods(ws, pods), url, key_env)


class EstateControl:
    """`PodControl` over a workspace: the gateway's starts and stops are the CLI's own writes."""

    def __init__(self, ws: Workspace, secrets: tuple[str, ...] = ()) -> None:
        self.ws = ws
        self.secrets = tuple(s for s in secrets if s)
        self._fits: tuple[Any, dict[str, Any]] = ((), {})

    def fits(self, pods: list[Any]) -> dict[str, Any]:
        """The fit-check's report per pod on its GPUs (priced once per estate content; a pod it cannot price is absent)."""
        from backend.estate import check_estate
        from backend.models import Estate

        key = tuple((p.name, p.slug, p.gpus) for p in pods)
        if self._fits[0] != key:
            try:
                check = check_estate(Estate(pods=pods), self.ws.gpus_or_none(), self.ws.catalog())
                self._fits = (key, dict(check.fits))
            except C3Error:
                self._fits = (key, {})
        return self._fits[1]

    def pods(self) -> list[Any]:
        pods = self.ws.pods()
        return gateway_pods(self.ws, pods, self.fits(pods))

    def running(self) -> set[str]:
        label = self.ws.estate_label  # a pod of the same name from another estate file is not this estate's pod
        return {w.pod for w in self.ws.ctx.runtime.workloads().values() if w.running and w.estate == label}

    def start(self, name: str, timeout_s: float, asleep: tuple[str, ...] = ()) -> Any:
        from backend.actions.boot_pods import BootPods
        from backend.gateway.config import StartResult

        action = BootPods(self.ws, (name,), timeout_s=timeout_s, asleep=asleep)
        blocking = [p for p in action.problems() if p.blocking]
        if blocking:
            return StartResult(ok=False, started=False, detail=self.redact(blocking[0].message))
        outcome = action.run(ignore_progress).data[0]
        tail = tuple(self.redact(line) for line in (outcome.log_tail or "").splitlines()[-LOG_LINES:])
        return StartResult(ok=outcome.ok, started=outcome.ok and outcome.phase != "already-running", elapsed_s=outcome.elapsed_s,
                           detail=self.redact(outcome.detail), log_tail=tail)

    def stop(self, name: str) -> None:
        from backend.actions.stop_pod import StopPod

        StopPod(self.ws, name, only_from=self.ws.estate_path).run(ignore_progress)

    def _port(self, name: str) -> int:
        return int(self.ws.pod(name).port)

    def sleep(self, name: str) -> None:
        from backend.gateway import sleepctl

        port, key = self._port(name), self._engine_key()
        sleepctl.sleep("127.0.0.1", port, level=1, api_key=key)
        if not sleepctl.is_sleeping("127.0.0.1", port, api_key=key):
            raise sleepctl.SleepError(f"pod {name} answered /sleep but /is_sleeping says it is awake")

    def wake(self, name: str) -> Any:
        import time

        from backend.errors import C3Error
        from backend.gateway import sleepctl
        from backend.gateway.config import StartResult

        began = time.monotonic()
        port, key = self._port(name), self._engine_key()
        try:
            sleepctl.wake("127.0.0.1", port, api_key=key)
            if sleepctl.is_sleeping("127.0.0.1", port, api_key=key):
                return StartResult(ok=False, started=False, elapsed_s=time.monotonic() - began, detail=f"pod {name} still sleeps after /wake_up")
        except C3Error as exc:
            return StartResult(ok=False, started=False, elapsed_s=time.monotonic() - began, detail=self.redact(exc.message))
        return StartResult(ok=True, started=False, elapsed_s=time.monotonic() - began, detail="woken")

    def sleeping(self, name: str) -> bool:
        from backend.gateway import sleepctl

        try:
            return sleepctl.is_sleeping("127.0.0.1", self._port(name), api_key=self._engine_key())
        except C3Error:
            return False

    @staticmethod
    def _engine_key() -> str | None:
        from backend.settings import current

        key = current().vllm_api_key
        return key.get_secret_value() if key is not None and key.get_secret_value() else None

    def redact(self, text: str) -> str:
        """An engine's line as a client may see it: known secrets and anything that looks like a token are `***`."""
        from backend.secrets_env import SECRET_VALUE

        for secret in self.secrets:
            text = text.replace(secret, "***")
        return SECRET_VALUE.sub("***", text)


@register
@dataclass
class ServeGateway(Action):
    key = "gateway_serve"
    doing = "start the gateway on {target}"
    ws: Workspace
    host: str = "127.0.0.1"
    port: int = 8012
    idle_ttl_s: float = 0.0
    queue_limit: int = 64
    boot_timeout_s: float = 900.0
    min_residency_s: float = 30.0
    """A pod runs at least this long before a swap may stop it."""
    swap_wait_s: float = 120.0
    """How long a request is held for a swap that may not happen yet (then 503); 0: 429 at once."""
    api_key_file: Path | None = None
    """A 0600 file holding the gateway's API key; else `C3_GATEWAY_API_KEY`; else no key."""

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> ServeGateway:
        return cls(ws, **request)

    @property
    def target(self) -> str | None:
        return f"{self.host}:{self.port}"

    def _api_key(self) -> str | None:
        from backend.settings import current

        if self.api_key_file is not None:
            return read_key_file(self.api_key_file)
        key = current().gateway_api_key
        return key.get_secret_value() if key is not None and key.get_secret_value() else None

    def config(self) -> Any:
        from backend.gateway.config import GatewayConfig
        from backend.gateway.status import gateway_dir
        from backend.settings import current

        key = self._api_key()
        self.ws.pods()  # a broken estate file is one error line now, not a gateway that cannot route
        return GatewayConfig(host=self.host, port=self.port, idle_ttl_s=self.idle_ttl_s, queue_limit=self.queue_limit,
                             boot_timeout_s=self.boot_timeout_s, min_residency_s=self.min_residency_s,
                             swap_wait_s=self.swap_wait_s, api_key=key, engine_key=current().vllm_api_key, state_dir=gateway_dir())

    def plan(self) -> Plan:
        title = f"Gateway on {self.target}"
        try:
            config = self.config()
            pods = self.ws.pods()
        except C3Error as error:
            return Plan(title, (f"start the gateway on {self.target}: {error.message}",))
        lines = [f"listen on {config.host}:{config.port}" + (" (API key required)" if config.api_key is not None else ""),
                 f"route by model to {len(pods)} pod(s) of {self.ws.estate_path}; a stopped pod is booted as `c3 pod up` boots it",
                 f"stop pods it started after {self.idle_ttl_s:g}s unused" if self.idle_ttl_s else "no idle stop (--idle-ttl 0)",
                 f"on-demand pods sharing GPUs are swapped by fit, each kept at least {self.min_residency_s:g}s",
                 f"a request waits up to {self.swap_wait_s:g}s for its swap" if self.swap_wait_s else "a swap that must wait is 429 (--swap-wait 0)"]
        return Plan(title, tuple(lines))

    def problems(self) -> list[Problem]:
        return problems_of(self.config)

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.gateway.serve import run_gateway
        from backend.settings import current

        config = self.config()
        settings = current()
        secrets = [config.api_key.get_secret_value() if config.api_key is not None else ""]
        secrets += [s.get_secret_value() for s in (settings.vllm_api_key, settings.hf_token, settings.hugging_face_hub_token) if s is not None]
        run_gateway(config, EstateControl(self.ws, tuple(secrets)))
        return Outcome(True, f"gateway on {self.target} stopped", data=config)
