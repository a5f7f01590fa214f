"""The cockpit's Shards view polls each node once a second (backend.views.shard.live_shards). Without a
ShardWatch every poll opened a new SSH connection to every node; with one (what the facade holds), one
connection per node serves every poll, and it is closed once the polls stop.

The nodes are an in-process asyncssh server on loopback (in its own thread, counting the connections it
accepts); the commands it is sent run on this machine. Loopback is this machine to c3, so the test makes
`open_shell` connect over SSH as it does for a remote node."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time

import asyncssh
import pytest

from backend.remote import fleet
from backend.remote.ssh import SshOptions, SshShell
from backend.shard import announce
from backend.views.shard import ShardWatch, live_shards
from tests.nodes.test_ssh_adapter import _Server


class _Sshd(_Server):
    """The SSH adapter tests' server, in a thread of its own; `accepted` and `open` count its connections."""

    def __init__(self, tmp_path):
        super().__init__(tmp_path)
        self.accepted = 0
        self.open = 0
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(30)
        self.port = self.server.sockets[0].getsockname()[1]
        pub = self.host_key.export_public_key("openssh").decode().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {pub[0]} {pub[1]}\n")

    async def _start(self):
        sshd = self

        class Counting(asyncssh.SSHServer):
            def connection_made(self, conn):
                sshd.accepted += 1
                sshd.open += 1

            def connection_lost(self, exc):
                sshd.open -= 1

        async def handle(process):
            data = await process.stdin.read()
            local = await asyncio.create_subprocess_shell(process.command, stdin=asyncio.subprocess.PIPE,
                                                          stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await local.communicate(data)
            process.stdout.write(out)
            process.stderr.write(err)
            process.exit(local.returncode)

        authorized = asyncssh.import_authorized_keys(self.client_key.export_public_key().decode())
        return await asyncssh.create_server(Counting, "127.0.0.1", 0, server_host_keys=[self.host_key],
                                            authorized_client_keys=authorized, process_factory=handle, encoding=None)

    def close(self) -> None:
        self.server.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def sshd(tmp_path, monkeypatch):
    server = _Sshd(tmp_path)
    options = SshOptions(known_hosts_files=(server.known_hosts,))
    monkeypatch.setattr(fleet, "open_shell", lambda node, _options=None: SshShell.connect(node, options))
    # A shard "running" on two nodes (the record's runner is this test process, so it is polled).
    announce.write(announce.ShardRecord(tag="a-39999", backend="mp", model="org/m", api_url="http://127.0.0.1:39998/v1", head_port=39999,
                                        pid=os.getpid(), nodes=[server.node("a"), server.node("b")], state="serving", started_at=time.time()))
    try:
        yield server
    finally:
        server.close()


def _poll_for(seconds: float, poll) -> int:
    """Poll once a second for `seconds`, as the view does; how many polls answered."""
    polls = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.monotonic()
        [shard] = poll()
        assert [r.node for r in shard.ranks] == ["a", "b"] and shard.headline == "degraded"  # nothing runs: both ranks dead
        polls += 1
        time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
    return polls


def test_the_shards_view_keeps_one_connection_per_node_between_polls(sshd):
    polls = _poll_for(10, live_shards)
    before = sshd.accepted
    assert before == 2 * polls  # a connection to each node at every poll
    watch = ShardWatch(idle_s=2)
    try:
        polls_after = _poll_for(10, watch.poll)
        after = sshd.accepted - before
        assert after == 2 and sshd.open == 2, (after, sshd.open)  # one per node, kept
        assert watch.pool.opened == 2
        # The view went away: the connections close by themselves once the polls stop.
        deadline = time.monotonic() + 10
        while sshd.open and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sshd.open == 0
        watch.poll()  # and a poll after that connects again
        assert sshd.accepted - before == 4
    finally:
        watch.close()
    print(f"shards view over 10 s: {before} SSH connections in {polls} polls without a watch, "
          f"{after} in {polls_after} polls with one", file=sys.stderr)
    deadline = time.monotonic() + 10
    while sshd.open and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sshd.open == 0  # close() closed them


def test_a_dropped_connection_is_opened_again_on_the_next_poll(sshd):
    watch = ShardWatch(idle_s=30)
    try:
        watch.poll()
        assert sshd.accepted == 2
        # The server drops every connection (a node rebooted): the next poll reads the ranks unreachable
        # or reconnects, and the one after reads them over fresh connections.
        async def drop():
            for shell in list(watch.pool._shells.values()):
                shell[1]._conn.abort()

        watch.run(drop())
        time.sleep(0.5)
        watch.poll()
        [shard] = watch.poll()
        assert all(r.state != "unreachable" for r in shard.ranks), shard
        assert sshd.accepted >= 4
    finally:
        watch.close()
