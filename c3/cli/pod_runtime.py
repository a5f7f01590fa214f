"""`c3 pod up|down|status|logs|try|exec`: run the pods the estate file plans (added to ESTATE's `pod` group).

`register(pod_group)` attaches the commands; `is_running(pod)` is what `pod rm` asks before removing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from backend.actions import Progress, refuse_on
from backend.actions.workspace import Workspace
from backend.errors import Refused, UsageError
from backend.models import Pod
from backend.views.estate_file import estate_path as resolve_file
from backend.views.estate_file import planned_pods as load_pods
from c3.cli.common import emit_json, exit_if_unreachable, file_option, json_option, node_trouble

if TYPE_CHECKING:
    from backend.views import PodStatus
    from backend.views.node_pods import NodePods


def find_pod(pods: list[Pod], name: str, path: Path) -> Pod:
    found = next((p for p in pods if p.name.casefold() == name.casefold()), None)
    if found is None:
        names = ", ".join(p.name for p in pods) or "none"
        raise Refused(f"pod `{name}` not found in {path}", hint=f"pods in the file: {names}")
    return found


def gpu_mode_option(func: Any) -> Any:
    return click.option("--gpu-mode", type=click.Choice(["nvidia", "cdi", "env"]), default=None, help="Force how GPUs reach the container (default: detect; env C3_GPU_MODE).")(func)


def echo_progress(pod: str, line: str) -> None:
    click.echo(f"[{pod}] {line}", err=False)


def echo_step(step: Progress) -> None:
    """A boot's own lines, `[pod] line` (the once-a-second refreshes carry none)."""
    if step.line is not None:
        echo_progress(step.pod, step.line)


def report_outcome(outcome: Any, port: int | None = None) -> None:
    """Print a boot outcome; raise Refused on failure (after the engine's last log lines)."""
    if outcome.ok:
        where = f" on http://127.0.0.1:{port}" if port else ""
        if outcome.phase == "already-running":
            click.echo(f"[{outcome.pod}] already running{where}")
        else:
            click.echo(f"[{outcome.pod}] ✓ serving{where} after {outcome.elapsed_s:.1f} s")
        if outcome.placement is not None:
            click.echo(f"[{outcome.pod}] {outcome.placement.summary()}")
        return
    if outcome.log_tail:
        click.echo(f"[{outcome.pod}] last log lines:", err=True)
        for line in outcome.log_tail.rstrip().splitlines():
            click.echo(f"    {line}", err=True)
    where = f" (boot log: {outcome.boot_log})" if outcome.boot_log else ""
    raise Refused(f"pod {outcome.pod} failed to boot: {outcome.detail}{where}", hint=f"`c3 pod logs {outcome.pod}` shows the engine's output")


def placement_failure(outcome: Any) -> None:
    if outcome.ok and outcome.placement is not None and outcome.placement.verdict == "mismatch":
        raise Refused(
            f"pod {outcome.pod} serves, but not on exactly its GPUs: {outcome.placement.reason}",
            hint=f"it is left running; `c3 pod down {outcome.pod}`, then check --gpu-mode and the container runtime",
        )


def is_running(pod: Pod | str) -> bool | None:
    """Does the pod's workload run? Raises EnvironmentProblem when the runtime cannot tell (daemon down)."""
    from backend.views.workloads import pod_running

    return pod_running(pod if isinstance(pod, str) else pod.name)


def register(pod_group: click.Group) -> None:
    """Attach up/down/status/logs to the `pod` group."""

    @pod_group.command("up")
    @click.argument("name")
    @click.option("--force", is_flag=True, help="Pass a failing gate (VRAM, port, GPUs held) with a warning.")
    @click.option("--timeout", "timeout_s", type=click.FloatRange(1), default=900.0, show_default=True, help="Seconds to wait for the engine to serve.")
    @gpu_mode_option
    @file_option
    def up(name: str, force: bool, timeout_s: float, gpu_mode: str | None, file: Path | None) -> None:
        """Boot one pod: gates, launch pinned to its GPUs, wait until it serves, verify placement."""
        from backend.actions.boot_pods import BootPods

        path = resolve_file(file)
        pod = find_pod(load_pods(path), name, path)
        action = BootPods(Workspace(path, forced_mode=gpu_mode), (pod.name,), force=force, timeout_s=timeout_s)
        refuse_on(action.problems())
        for outcome in action.run(echo_step).data:
            report_outcome(outcome, pod.port)
            placement_failure(outcome)

    @pod_group.command("down")
    @click.argument("name")
    @click.option("--timeout", "timeout_s", type=click.FloatRange(0), default=30.0, show_default=True, help="Seconds to wait before killing.")
    @file_option
    def down(name: str, timeout_s: float, file: Path | None) -> None:
        """Stop and remove a pod's container (works for any c3 pod, planned or not).

        With `--file`, only a pod started from that estate file is stopped: a pod of the same name that
        another estate file started is refused, naming that file (workloads are estate file + pod name).
        """
        from backend.actions.stop_pod import StopPod

        action = StopPod(Workspace(resolve_file(file)), name, timeout_s=timeout_s, only_from=resolve_file(file) if file is not None else None)
        refuse_on(action.problems())
        result = action.run(echo_step).data
        if result.stopped:
            click.echo(f"[{name}] stopped" + (f" (from {result.origin})" if result.origin else ""))
        else:
            click.echo(f"[{name}] was not running")

    @pod_group.command("status")
    @json_option
    @file_option
    @click.option("--all-nodes", "all_nodes", is_flag=True,
                  help="Also the c3 pods of every other registered node, read over its SSH target (exit 3 if one is unreachable).")
    def status(as_json: bool, file: Path | None, all_nodes: bool) -> None:
        """Each planned pod: running, serving, placement verdict."""
        from backend.views.estate_status import estate_status

        path = resolve_file(file)
        found = estate_status(path)
        rows = found.pods
        others = None
        if all_nodes:
            from backend.views.node_pods import other_node_pods

            others = other_node_pods()
        if as_json:
            emit_json(found.model_dump(mode="json") | ({"nodes": [n.model_dump(mode="json") for n in others]} if others is not None else {}))
        else:
            print_status(path, rows)
            for w in found.unplanned:
                where = f" from {w.estate}" if w.estate else ""
                click.echo(f"also on this host (not in this file): {w.name} {w.slug} port {w.port} {'running' if w.running else 'stopped'}{where}")
            for node in others or []:
                print_node_pods(node)
        exit_if_unreachable([n.node for n in others or [] if not n.reachable], len(others or []))

    @pod_group.command("logs")
    @click.argument("name")
    @click.option("--follow", "-f", is_flag=True, help="Keep printing new lines until the pod stops.")
    @click.option("--tail", type=click.IntRange(0), default=200, show_default=True, help="Lines of history to show.")
    def logs(name: str, follow: bool, tail: int) -> None:
        """The engine's output (the container's log, or the simulator's)."""
        from backend.views.workloads import pod_log_output

        found = pod_log_output(name, tail, follow=follow)
        if found.boot_log is not None:
            click.echo(f"[{name}] no container; last boot log {found.boot_log}:", err=True)
            click.echo(found.text)
        elif found.follow is not None:
            for line in found.follow:
                click.echo(line)
        else:
            click.echo(found.text, nl=False)

    @pod_group.command("exec", context_settings={"ignore_unknown_options": True})
    @click.argument("name")
    @click.argument("command", nargs=-1, type=click.UNPROCESSED)
    @click.option("--timeout", "timeout_s", type=click.FloatRange(1, 86400), default=60.0, show_default=True, help="Seconds to wait for the command.")
    def exec_(name: str, command: tuple[str, ...], timeout_s: float) -> None:
        """Run a command in a pod's container (docker exec, no terminal): `c3 pod exec NAME -- CMD ARGS…`.

        Prints its output (stdout and stderr together; the secrets c3 passes to containers masked as
        ***); a command that exits non-zero is an error (exit 1). On the simulated rig the command runs
        as a local process in the pod's sandbox (its own directory, the engine's environment, C3_POD and
        C3_SIMULATED=1).
        """
        from backend.views.workloads import pod_exec

        if not command:
            raise UsageError("give the command after --", hint=f"e.g. c3 pod exec {name} -- nvidia-smi")
        found = pod_exec(name, list(command), timeout_s=timeout_s)
        click.echo(found.output, nl=False)
        if found.output and not found.output.endswith("\n"):
            click.echo()
        if found.truncated:
            click.echo(f"[{name}] output cut at 4 MiB", err=True)
        if found.exit_code != 0:
            raise Refused(f"`{' '.join(command)[:200]}` exited {found.exit_code} in pod {name}")

    @pod_group.command("try")
    @click.argument("name")
    @click.argument("prompt", required=False)
    @click.option("--max-tokens", type=click.IntRange(1, 4096), default=64, show_default=True, help="Tokens to generate at most.")
    @click.option("--timeout", "timeout_s", type=click.FloatRange(1, 3600), default=60.0, show_default=True, help="Seconds for the whole request.")
    @json_option
    @file_option
    def try_(name: str, prompt: str | None, max_tokens: int, timeout_s: float, as_json: bool, file: Path | None) -> None:
        """Send one test prompt to a running pod; print the answer, TTFT, tokens and tokens/s.

        A streaming chat request (a plain completion when the engine serves no chat) to the port the
        estate file publishes the pod on; PROMPT defaults to a short greeting.
        """
        from backend.views.try_pod import DEFAULT_PROMPT, try_pod
        from c3.metrics_text import try_numbers

        if prompt is not None and not prompt.strip():
            raise UsageError("PROMPT is empty", hint=f'give a prompt, e.g. c3 pod try {name} "Say hello"')
        result = try_pod(name, prompt or DEFAULT_PROMPT, max_tokens=max_tokens, timeout_s=timeout_s, file=file)
        if as_json:
            emit_json(result.model_dump(mode="json"))
            return
        click.echo(result.answer.strip())
        click.echo(f"[{result.pod}] {try_numbers(result)} ({result.api}, model {result.model})")


def print_node_pods(node: NodePods) -> None:
    """One other node's pods under `pod status --all-nodes`, marked by the node's name."""
    if node_trouble(f"node {node.node}", node.reachable, node.error):
        return
    click.echo(f"node {node.node}: {len(node.pods)} pod(s){' (more not listed)' if node.cut else ''}")
    width = max((len(p.name) for p in node.pods), default=0)
    for p in node.pods:
        port = f"port {p.port}" if p.port is not None else "no port"
        click.echo(f"  {node.node}/{p.name.ljust(width)}  {p.slug}  {port}  {p.state} ({p.status})")


def print_status(path: Path, rows: list[PodStatus]) -> None:
    if not rows:
        click.echo(f"no pods in {path}")
        return
    width = max(len(r.name) for r in rows)
    for r in rows:
        state = "serving" if r.serving else ("running" if r.running else {"absent": "stopped"}.get(r.state, r.state or "stopped"))
        place = r.placement
        mark = {"ok": "✓", "mismatch": "⚠", "unknown": "?"}[place.verdict]
        detail = f" ({place.reason})" if place.reason and (r.running or r.state == "other-estate") else ""
        click.echo(f"{r.name.ljust(width)}  {r.slug}  GPU {r.gpus}  port {r.port}  {state}  placement {mark} {place.verdict}{detail}")
        if r.usage is not None:
            from c3.metrics_text import usage_text

            click.echo(f"{' ' * width}  {usage_text(r.usage)}")
        if r.metrics is not None:
            from c3.metrics_text import metrics_line

            click.echo(f"{' ' * width}  engine: {metrics_line(r.metrics, form='wide')}")
        elif r.metrics_error:
            click.echo(f"{' ' * width}  engine metrics: {r.metrics_error}")
        if r.restart_count:
            click.echo(f"{' ' * width}  ⚠ restarted ({r.restart_count}×): its engine exited and Docker restarted the container")
        for f in place.foreign:
            who = f"pod {f.owner}" if f.owner else "not a c3 pod"
            click.echo(f"{' ' * width}  ⚠ pid {f.pid} ({who}) holds memory on GPU {f.gpu_index}")
