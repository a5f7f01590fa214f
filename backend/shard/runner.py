"""`c3 shard start` in the foreground: start every node's part in order, stream their output, and on
Ctrl+C (SIGINT/SIGTERM), on any part ending, or on a failed start, stop every node's part.

It runs the phases services, start, rendezvous, load and serve (backend.shard.phases), each with its
deadline; a failure is a PhaseFailure naming the phase, the node and that node's last output lines,
raised after every part was stopped.

Each process c3 starts carries `C3_SHARD=<tag>` in its environment, so a later `c3 shard stop` finds
what a crashed foreground left behind without a state file. The one file written is the cockpit's record
(backend.shard.announce): which nodes the shard spans, its state, and why it ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backend import first_token
from backend.errors import C3Error, PhaseFailure, terminal_safe
from backend.http_probe import probe
from backend.remote.fleet import close_all
from backend.remote.local import LocalShell
from backend.remote.shell import Shell, Spawned
from backend.shard import announce, ray_cmds
from backend.shard.kv_ranks import KvByRank
from backend.shard.models import NodePart, ShardPlan, Step
from backend.shard.phases import Timing, in_phase
from backend.shard.render import start_order
from backend.shard.rpc import endpoint_of as rpc_endpoint
from backend.shard.scripts import (
    kill_group_script,
    launch_script,
    marker_script,
    run_script,
    secrets_stdin,
    tagged_script,
)

__all__ = ["ShardRunner", "Timing"]

Echo = Callable[[str], None]
TAIL_LINES = 8
"""How many of a node's last output lines a phase failure shows."""


@dataclass
class _Running:
    part: NodePart
    step: Step
    proc: Spawned
    pump: asyncio.Task[None] | None = None


@dataclass
class ShardRunner:
    """Runs one plan; `await run()` returns the exit code for the CLI."""

    plan: ShardPlan
    execs: dict[str, Shell]
    echo: Echo
    secrets: dict[str, str] = field(default_factory=dict)
    timing: Timing = field(default_factory=Timing)
    ray: str = "ray"
    running: list[_Running] = field(default_factory=list)
    stop_reason: str = ""
    tails: dict[str, deque[str]] = field(default_factory=dict)
    """Each node's last output lines, for a phase failure."""
    record: announce.ShardRecord | None = None
    """What the cockpit reads about this shard (None until run() starts)."""
    kv: KvByRank | None = None
    """Each rank's KV memory from its boot log (vLLM backends), said once with the binding rank."""

    async def run(self) -> int:
        """Start, supervise, always clean up; the exit code (130/143 after a signal)."""
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        received: list[int] = []

        def on_signal(signum: int) -> None:
            received.append(signum)
            stop.set()

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, on_signal, signum)
        self._announce(None)
        supervise = asyncio.create_task(self._start_and_watch())
        stopper = asyncio.create_task(stop.wait())
        code = 1
        error: C3Error | None = None
        try:
            await asyncio.wait({supervise, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if supervise.done():
                try:
                    code = supervise.result()
                except C3Error as exc:
                    error = exc
                stopped_by = await self._stop_requested()
                if stopped_by:
                    # `c3 shard stop` ended the parts on purpose: that is not a failure.
                    self.stop_reason = f"stopped by request (`c3 shard stop` on {', '.join(stopped_by)})"
                    self.echo(f"c3: {self.stop_reason}")
                    code, error = 0, None
                elif error is not None:
                    self.echo(f"c3: {error.message}; stopping every node's part")
            else:
                supervise.cancel()
                with contextlib.suppress(asyncio.CancelledError, C3Error):
                    await supervise
                name = signal.Signals(received[0]).name if received else "signal"
                self.echo(f"c3: {name}: stopping every node's part")
                code = 128 + (received[0] if received else signal.SIGINT)
                self.stop_reason = f"{name}: stopped"
        finally:
            stopper.cancel()
            # A second Ctrl+C during cleanup must not abandon remote processes half-stopped.
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, lambda: self.echo("c3: still stopping, please wait"))
            try:
                await self.cleanup()
            finally:
                for signum in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(signum)
                self._announce("ended", error.message if error is not None else self.stop_reason or f"ended with exit {code}",
                               failed_node=error.node if isinstance(error, PhaseFailure) else None)
        if error is not None:
            raise error
        return code

    def _announce(self, state: announce.ShardState | None, reason: str | None = None, failed_node: str | None = None) -> None:
        """Write the cockpit's record: created with `None`, then `serving` or `ended` (with why). A record
        that cannot be written is said once and never stops the shard."""
        try:
            if self.record is None:
                nodes = [self.execs[p.node].node for p in self.plan.parts]
                # A node this runner drives without SSH (the head, or a test's stand-in) is local to the cockpit too.
                nodes = [n if n.local or not isinstance(self.execs[n.name], LocalShell) else n.model_copy(update={"local_override": True})
                         for n in nodes]
                self.record = announce.ShardRecord(tag=self.plan.tag, backend=self.plan.backend, model=self.plan.model, api_url=self.plan.api_url,
                                                   head_port=self.plan.head_port, pid=os.getpid(), nodes=nodes, started_at=time.time())
            if state is not None:
                self.record = self.record.model_copy(update={"state": state, "reason": reason, "failed_node": failed_node,
                                                             "ended_at": time.time() if state == "ended" else None})
            announce.write(self.record)
        except (OSError, C3Error, ValueError) as exc:
            if state is None:
                self.echo(f"c3: the cockpit will not show this shard: its record could not be written ({exc})")

    # --- start ------------------------------------------------------------------------------

    async def _stop_requested(self) -> list[str]:
        """The nodes where `c3 shard stop` left this shard's stop marker."""
        script = marker_script("check", self.plan.tag)
        results = await asyncio.gather(*(run_script(self.execs[p.node], script, timeout=30) for p in self.plan.parts), return_exceptions=True)
        return [p.node for p, r in zip(self.plan.parts, results, strict=True) if not isinstance(r, BaseException) and "stop=requested" in r.stdout]

    def _tail(self, node: str) -> tuple[str, ...]:
        return tuple(self.tails.get(node, ()))

    def _failed(self, phase: str, node: str, error: C3Error) -> PhaseFailure:
        return in_phase(phase, node, error, tail=self._tail(node))

    async def _ended(self, r: _Running) -> int:
        """The exit status of a part that ended, once its last output lines are read."""
        if r.pump is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(r.pump, 2)
        return r.proc.returncode if r.proc.returncode is not None else -1

    def _part_died(self, phase: str, r: _Running, rc: int, while_: str) -> PhaseFailure:
        is_server = r.part.role == "head" and "serve" in r.step.label
        return PhaseFailure(phase, r.part.node, f"{r.step.label} exited with status {rc} {while_}", tail=self._tail(r.part.node),
                            hint=f"its last lines are above; `c3 shard status --nodes {','.join(p.node for p in self.plan.parts)}` "
                                 "shows what is left (nothing should be)",
                            exit_code=rc if is_server and rc > 0 else 1)

    async def _start_and_watch(self) -> int:
        # A marker left by an earlier `shard stop` must not turn this run's crash into a success.
        clear = marker_script("clear", self.plan.tag)
        await asyncio.gather(*(run_script(self.execs[p.node], clear, timeout=30) for p in self.plan.parts))
        if self.plan.stop_services:
            await self._stop_services()
        parts = {p.node: p for p in self.plan.parts}
        head = self.plan.parts[0]
        for node, index in start_order(self.plan):
            part = parts[node]
            step = part.steps[index]
            try:
                await self._spawn(part, step)
            except C3Error as error:
                raise self._failed("start", node, error) from None
            deadline = self.timing.rendezvous_s
            if self.plan.backend == "ray" and step.label == "ray head":
                await self._wait_ray(head, nodes=1, deadline_s=deadline, waiting_for=head.node)
            elif self.plan.backend == "ray" and step.label == "ray worker":
                await self._wait_ray(head, nodes=part.rank + 1, deadline_s=deadline, waiting_for=part.node)
            elif (endpoint := rpc_endpoint(step)) is not None:
                await self._wait_listening(part, *endpoint, deadline_s=deadline)
        self.echo(f"c3: all {len(self.plan.parts)} nodes started; phase load: waiting for {self.plan.api_url}/models "
                  f"(deadline {self.timing.load_s:.0f}s; Ctrl+C stops every node)")
        waits: dict[asyncio.Task[Any], _Running] = {asyncio.create_task(r.proc.wait()): r for r in self.running}
        ready = asyncio.create_task(self._wait_ready())
        try:
            started = time.monotonic()
            while not ready.done():
                left = self.timing.load_s - (time.monotonic() - started)
                if left <= 0:
                    raise PhaseFailure("load", head.node, f"{self.plan.api_url}/models did not answer within {self.timing.load_s:.0f}s",
                                       tail=self._tail(head.node),
                                       hint="the server is still loading or hung: raise it with --deadline load=SECONDS, or read its output above")
                done, _ = await asyncio.wait({*waits, ready}, timeout=min(left, self.timing.progress_s), return_when=asyncio.FIRST_COMPLETED)
                ended = next((waits[t] for t in done if t in waits), None)
                if ended is not None:
                    raise self._part_died("load", ended, await self._ended(ended), "before the server answered")
                if not done:
                    self.echo(f"c3: phase load: still waiting for {self.plan.api_url}/models ({time.monotonic() - started:.0f}s "
                              f"of {self.timing.load_s:.0f}s)")
            self.echo(f"c3: ready: {self.plan.api_url}/models serves {', '.join(ready.result()) or '(no models listed)'}")
            await self._first_token(head, ready.result(), waits)
            self._announce("serving")
            finished, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            ended = waits[next(iter(finished))]
            rc = await self._ended(ended)
            self.echo(f"c3: {ended.step.label} on {ended.part.node} exited with status {rc}; stopping every node's part")
            if ended.part.role == "head" and "serve" in ended.step.label and rc == 0:
                return 0
            raise self._part_died("serve", ended, rc, "while serving")
        finally:
            ready.cancel()
            for task in waits:
                task.cancel()

    async def _first_token(self, head: NodePart, models: list[str], waits: dict[asyncio.Task[Any], _Running]) -> None:
        """Phase first_token: one `max_tokens: 1` completion through the head until a token comes back,
        asked again while nothing answers or the server says it is still loading; a part that ends
        meanwhile, an error answer or the deadline fails the phase (after an error answer, a part that
        ends within a few seconds is named: it is usually the cause)."""
        deadline_s = self.timing.first_token_s
        url = f"{self.plan.api_url}/completions"
        model = models[0] if models else self.plan.model
        shown = terminal_safe(model, one_line=True)  # the server's own answer: never raw to the terminal
        self.echo(f"c3: phase first_token: one completion (max_tokens 1, model {shown}) to {url} (deadline {deadline_s:.0f}s)")
        started = time.monotonic()
        last = "nothing asked yet"
        while (left := deadline_s - (time.monotonic() - started)) > 0:
            asking = asyncio.create_task(first_token.ask(self.plan.api_url, model))
            try:
                done, _ = await asyncio.wait({*waits, asking}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            finally:
                asking.cancel()
            ended = next((waits[t] for t in done if t in waits), None)
            if ended is not None:
                raise self._part_died("first_token", ended, await self._ended(ended), "before the first token came back")
            if asking not in done:
                break
            answer = asking.result()
            if answer.token is not None:
                self.echo(f"c3: serving: first token '{terminal_safe(answer.token, one_line=True)}' from {shown} "
                          f"after {time.monotonic() - started:.1f}s")
                return
            last = answer.problem
            if not answer.again:
                done, _ = await asyncio.wait(waits, timeout=self.timing.settle_s, return_when=asyncio.FIRST_COMPLETED)
                if done:
                    ended = waits[next(iter(done))]
                    raise self._part_died("first_token", ended, await self._ended(ended), f"when the head {answer.problem}")
                raise PhaseFailure("first_token", head.node, f"{url} {answer.problem}", tail=self._tail(head.node),
                                   hint="the server started but cannot answer a completion: read its output above")
            await asyncio.sleep(min(self.timing.poll_s, max(left, 0)))
        raise PhaseFailure("first_token", head.node, f"no token from {url} within {deadline_s:.0f}s (last: {last})",
                           tail=self._tail(head.node),
                           hint="the server is up but did not answer one token: raise it with --deadline first_token=SECONDS, "
                                "or read its output above")

    async def _spawn(self, part: NodePart, step: Step) -> None:
        script = launch_script(part.env, step, tag=self.plan.tag, secret_names=list(self.secrets))
        self.echo(f"c3: [{part.node}] starting {step.label}")
        proc = await self.execs[part.node].spawn(script, input=secrets_stdin(self.secrets))
        running = _Running(part=part, step=step, proc=proc)
        running.pump = asyncio.create_task(self._pump(part.node, proc))
        self.running.append(running)

    async def _pump(self, node: str, proc: Spawned) -> None:
        tail = self.tails.setdefault(node, deque(maxlen=TAIL_LINES))
        if self.kv is None and self.plan.backend != "rpc":  # llama.cpp over rpc: one server holds the whole KV cache
            self.kv = KvByRank([p.node for p in self.plan.parts])
        async for line in proc.lines():
            tail.append(line)
            self.echo(f"[{node}] {line}")
            if self.kv is not None and (said := self.kv.feed(node, line)):
                self.echo(said)

    async def _stop_services(self) -> None:
        step = self.plan.stop_services[0]
        results = await asyncio.gather(*(run_script(self.execs[p.node], shlex.join(step.argv), timeout=120) for p in self.plan.parts),
                                       return_exceptions=True)
        for part, result in zip(self.plan.parts, results, strict=True):
            if isinstance(result, C3Error):
                raise in_phase("services", part.node, result)
            if isinstance(result, BaseException):
                raise result
            said = (result.stderr or result.stdout).strip().splitlines()
            if result.exit_status == 5 or any("not loaded" in line for line in said):
                # systemctl's "unit not loaded": there is no single-node server on this node to stop.
                self.echo(f"c3: [{part.node}] {step.label}: no such unit there, nothing to stop")
                continue
            if result.exit_status != 0:
                raise PhaseFailure("services", part.node, f"{step.label} failed on {part.node}: {said[-1] if said else f'exit {result.exit_status}'}",
                                   tail=tuple(said[-TAIL_LINES:]))
            self.echo(f"c3: [{part.node}] {step.label}: done")

    async def _wait_ray(self, head: NodePart, *, nodes: int, deadline_s: float, waiting_for: str) -> None:
        """Poll `ray status` on the head until `nodes` are active (phase rendezvous, failing on
        `waiting_for`, the node that should join); fail early when a part died."""
        argv = ray_cmds.status_argv(self.ray, head=self.plan.head_address, port=self.plan.head_port)
        script = " ".join(argv) + " 2>&1"
        deadline = time.monotonic() + deadline_s
        last = ""
        while time.monotonic() < deadline:
            for r in self.running:
                if r.proc.returncode is not None:
                    raise self._part_died("rendezvous", r, await self._ended(r), "while the cluster was forming")
            try:
                result = await run_script(self.execs[head.node], script, timeout=30)
            except C3Error as error:
                raise self._failed("rendezvous", head.node, error) from None
            active, gpus = ray_cmds.parse_status(result.stdout)
            last = f"{active} node(s)"
            if active >= nodes:
                want = sum(p.gpus for p in self.plan.parts[:nodes])
                if gpus is not None and gpus + 1e-9 < want:
                    last = f"{active} node(s), {gpus:g} GPUs (want {want})"
                else:
                    self.echo(f"c3: Ray cluster has {active} node(s)" + (f", {gpus:g} GPU(s)" if gpus is not None else ""))
                    return
            await asyncio.sleep(self.timing.poll_s)
        raise PhaseFailure(
            "rendezvous", waiting_for, f"Ray cluster did not reach {nodes} node(s) within {deadline_s:.0f}s (last seen: {last})",
            hint="check the worker's output above; a firewall on the Ray ports or a wrong --node-ip-address are the usual causes",
            tail=self._tail(waiting_for),
        )

    async def _wait_listening(self, part: NodePart, address: str, port: int, *, deadline_s: float) -> None:
        """Until the worker's rpc-server accepts a TCP connection from here (the head): llama-server
        would otherwise fail to reach it; fail early when a part died."""
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            for r in self.running:
                if r.proc.returncode is not None:
                    raise self._part_died("rendezvous", r, await self._ended(r), "before the head started")
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(address, port), 3)
            except (OSError, TimeoutError):
                await asyncio.sleep(min(self.timing.poll_s, 0.2))
                continue
            writer.close()
            self.echo(f"c3: [{part.node}] rpc-server listening on {address}:{port}")
            return
        raise PhaseFailure("rendezvous", part.node, f"rpc-server on {part.node} did not accept connections on {address}:{port} within {deadline_s:.0f}s",
                           hint="check its output above; a firewall on the cluster link or a busy port are the usual causes", tail=self._tail(part.node))

    async def _wait_ready(self) -> list[str]:
        """Until the head's /models answers; the model ids it lists."""
        url = f"{self.plan.api_url}/models"
        while True:
            models = await asyncio.to_thread(_get_models, url)
            if models is not None:
                return models
            await asyncio.sleep(min(2.0, self.timing.poll_s * 2))

    # --- stop -------------------------------------------------------------------------------

    async def cleanup(self) -> None:
        """Stop every part: the server first, then `ray stop` on every node (Ray's own orderly stop;
        a SIGTERM to `ray start --block` makes Ray drain for up to 30 s), then whatever is left by
        process group, then a sweep for anything still carrying C3_SHARD."""
        started = time.monotonic()
        grace = self.timing.kill_grace_s
        server = [r for r in self.running if "serve" in r.step.label and r.part.role == "head"]
        if any(r.proc.returncode is None for r in server):
            await asyncio.gather(*(self._kill(r, grace) for r in server if r.proc.returncode is None), return_exceptions=True)
            self.echo(f"c3: server stopped ({time.monotonic() - started:.1f}s)")
        if self.plan.backend == "ray":
            stop = shlex.join(ray_cmds.stop_argv(self.ray)) + " >/dev/null 2>&1; true"
            await asyncio.gather(*(run_script(self.execs[p.node], stop, timeout=60) for p in self.plan.parts), return_exceptions=True)
            self.echo(f"c3: `ray stop` done on every node ({time.monotonic() - started:.1f}s)")
        rest = [r for r in reversed(self.running) if r not in server]
        if self.plan.backend == "ray":
            # `ray stop` already stopped each node's daemons; what is left is the `ray start --block`
            # wrapper, which answers SIGTERM by "draining" an empty node for up to 30 s.
            grace, settle = 1.0, 3.0
        else:
            settle = 0.0
        await asyncio.gather(*(self._kill(r, grace, settle) for r in rest if r.proc.returncode is None), return_exceptions=True)
        results = await asyncio.gather(
            *(run_script(self.execs[p.node], tagged_script("stop", grace_s=5, tag=self.plan.tag), timeout=60) for p in self.plan.parts),
            return_exceptions=True,
        )
        for part, result in zip(self.plan.parts, results, strict=True):
            if isinstance(result, BaseException):
                self.echo(f"c3: [{part.node}] could not check for leftovers: {result}")
        for r in self.running:
            if r.pump is not None:
                r.pump.cancel()
        await close_all(self.execs)
        self.echo(f"c3: every node's part is stopped ({time.monotonic() - started:.1f}s)")

    async def _kill(self, r: _Running, grace: float, settle: float = 0.0) -> None:
        if r.proc.pgid is None:
            return
        # The script returns once the group is gone (or was SIGKILLed), so there is nothing to wait
        # for remotely; an SSH channel may stay open while a daemon still holds its stdout.
        await run_script(self.execs[r.part.node], kill_group_script(r.proc.pgid, grace, settle_s=settle), timeout=grace + settle + 15)
        if self.execs[r.part.node].node.local:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(r.proc.wait(), 5)


def _get_models(url: str) -> list[str] | None:
    answer = probe(url, timeout=3)
    if not answer.ok:
        return None
    try:
        data = json.loads(answer.body.decode())
        return [str(m.get("id")) for m in data.get("data", []) if isinstance(m, dict)]
    except (ValueError, AttributeError):
        return None
