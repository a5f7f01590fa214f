"""The SSH adapter against an in-process asyncssh server on loopback: results, uploads, streaming,
and one distinct error per failure (unreachable, auth refused, unknown/changed host key, timeout)."""

from __future__ import annotations

import asyncio
import os
import stat

import asyncssh
import pytest

from backend.remote.fleet import Fleet
from backend.remote.known_hosts import fingerprint, trust_host_key
from backend.remote.local import LocalShell
from backend.remote.node import Node
from backend.remote.shell import NodeFailure
from backend.remote.ssh import SshOptions, SshShell, fetch_host_key
from tests.support import free_port


class _Server:
    def __init__(self, tmp_path):
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        self.client_key = asyncssh.generate_private_key("ssh-ed25519")
        self.key_file = tmp_path / "client_key"
        self.key_file.write_bytes(self.client_key.export_private_key())
        self.key_file.chmod(0o600)
        self.known_hosts = tmp_path / "known_hosts"
        self.commands: list[str] = []
        self.server = None
        self.port = 0

    async def start(self):
        async def handle(process):
            self.commands.append(process.command)
            if process.command.endswith("-c hang"):  # sent as `exec /bin/sh -c hang`
                await asyncio.sleep(30)
            data = await process.stdin.read()
            local = await asyncio.create_subprocess_shell(
                process.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
            )
            out, err = await local.communicate(data)
            process.stdout.write(out)
            process.stderr.write(err)
            process.exit(local.returncode)

        authorized = asyncssh.import_authorized_keys(self.client_key.export_public_key().decode())
        self.server = await asyncssh.create_server(
            asyncssh.SSHServer, "127.0.0.1", 0, server_host_keys=[self.host_key],
            authorized_client_keys=authorized, process_factory=handle, encoding=None,
        )
        self.port = self.server.sockets[0].getsockname()[1]
        pub = self.host_key.export_public_key("openssh").decode().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {pub[0]} {pub[1]}\n")
        return self

    def node(self, name="n1", key=None) -> Node:
        return Node(name=name, host="http://127.0.0.1:8000", ssh=f"root@127.0.0.1:{self.port}", ssh_key=str(key or self.key_file))

    def options(self, known_hosts=None, **kw) -> SshOptions:
        return SshOptions(known_hosts_files=(known_hosts or self.known_hosts,), **kw)

    async def stop(self):
        self.server.close()
        await self.server.wait_closed()


@pytest.fixture
async def server(tmp_path):
    srv = await _Server(tmp_path).start()
    yield srv
    await srv.stop()


async def test_run_returns_status_and_output(server):
    shell = await SshShell.connect(server.node(), server.options())
    try:
        result = await shell.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
        assert (result.exit_status, result.stdout.strip(), result.stderr.strip()) == (3, "out", "err")
        assert result.last_line() == "err"
        with pytest.raises(NodeFailure) as failure:
            await shell.run("false", check=True)
        assert failure.value.kind == "command" and failure.value.exit_code == 1
        assert "node `n1`" in failure.value.message
    finally:
        await shell.close()


async def test_upload_is_0600_and_secret_never_on_a_command_line(server, tmp_path):
    target = tmp_path / "remote" / "secret.env"
    shell = await SshShell.connect(server.node(), server.options())
    try:
        await shell.put_file("API_KEY=sk-very-secret\n", str(target))
    finally:
        await shell.close()
    assert target.read_text() == "API_KEY=sk-very-secret\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert server.commands and not any("sk-very-secret" in c for c in server.commands)


async def test_stream_yields_lines(server):
    shell = await SshShell.connect(server.node(), server.options())
    try:
        lines = [line async for line in shell.stream("printf 'a\\nb\\n'; echo c >&2")]
    finally:
        await shell.close()
    assert sorted(lines) == ["a", "b", "c"]


async def test_command_timeout_is_its_own_error(server):
    shell = await SshShell.connect(server.node(), server.options())
    try:
        with pytest.raises(NodeFailure) as failure:
            await shell.run("hang", timeout=0.5)
    finally:
        await shell.close()
    assert failure.value.kind == "timeout" and "timed out" in failure.value.message


async def test_unreachable(server):
    node = Node(name="gone", host="http://127.0.0.1:8000", ssh=f"root@127.0.0.1:{free_port()}", ssh_key=str(server.key_file))
    with pytest.raises(NodeFailure) as failure:
        await SshShell.connect(node, server.options())
    assert failure.value.kind == "unreachable"
    assert failure.value.message.startswith("node `gone`: unreachable")
    assert failure.value.exit_code == 3


async def test_auth_refused(server, tmp_path):
    other = tmp_path / "other_key"
    other.write_bytes(asyncssh.generate_private_key("ssh-ed25519").export_private_key())
    with pytest.raises(NodeFailure) as failure:
        await SshShell.connect(server.node(key=other), server.options())
    assert failure.value.kind == "auth" and "authentication refused" in failure.value.message


async def test_unknown_host_key_refused_with_trust_hint(server, tmp_path):
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    with pytest.raises(NodeFailure) as failure:
        await SshShell.connect(server.node(), server.options(known_hosts=empty))
    assert failure.value.kind == "hostkey-unknown"
    assert "c3 node trust n1" in (failure.value.hint or "")


async def test_changed_host_key_refused(server, tmp_path):
    impostor = asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode().split()
    wrong = tmp_path / "wrong_known_hosts"
    wrong.write_text(f"[127.0.0.1]:{server.port} {impostor[0]} {impostor[1]}\n")
    with pytest.raises(NodeFailure) as failure:
        await SshShell.connect(server.node(), server.options(known_hosts=wrong))
    assert failure.value.kind == "hostkey-changed" and "mismatch" in failure.value.message


async def test_connect_timeout_when_server_never_speaks():
    async def silent(reader, writer):
        await asyncio.sleep(30)

    srv = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        node = Node(name="mute", host="http://127.0.0.1:8000", ssh=f"root@127.0.0.1:{port}")
        with pytest.raises(NodeFailure) as failure:
            await SshShell.connect(node, SshOptions(connect_timeout=0.5, known_hosts_files=()))
        assert failure.value.kind == "timeout"
    finally:
        srv.close()


async def test_fleet_runs_concurrently_with_errors_per_node(server):
    good = server.node("good")
    bad = Node(name="bad", host="http://127.0.0.1:8000", ssh=f"root@127.0.0.1:{free_port()}", ssh_key=str(server.key_file))
    async with Fleet([good, bad], server.options(), opener=SshShell.connect) as fleet:
        results = await fleet.run_all("sleep 0.3; echo hi")
    assert results["good"].stdout.strip() == "hi"
    assert isinstance(results["bad"], NodeFailure) and results["bad"].kind == "unreachable"


async def test_fetch_and_trust_host_key(server, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    node = server.node()
    offered = await fetch_host_key(node, SshOptions())
    expected = fingerprint(server.host_key.export_public_key("openssh").decode().split()[1])
    assert offered.fingerprint == expected and not offered.already_trusted
    with pytest.raises(NodeFailure):
        await SshShell.connect(node)  # not trusted yet: default files are empty
    path = trust_host_key(offered)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    shell = await SshShell.connect(node)
    try:
        assert (await shell.run("echo ok")).stdout.strip() == "ok"
    finally:
        await shell.close()
    assert (await fetch_host_key(node)).already_trusted


async def test_local_shell_runs_uploads_and_times_out(tmp_path):
    node = Node(name="here", host="http://127.0.0.1:8000", ssh="root@localhost")
    shell = LocalShell(node)
    assert (await shell.run(["echo", "a b"])).stdout == "a b\n"
    await shell.put_file(b"X=1\n", str(tmp_path / "d" / "f.env"))
    assert stat.S_IMODE(os.stat(tmp_path / "d" / "f.env").st_mode) == 0o600
    with pytest.raises(NodeFailure) as failure:
        await shell.run("sleep 5", timeout=0.3)
    assert failure.value.kind == "timeout"
    assert [line async for line in shell.stream("echo x; echo y")] == ["x", "y"]


async def test_spawn_feeds_stdin_and_reports_exit_status(server):
    shell = await SshShell.connect(server.node(), server.options())
    try:
        proc = await shell.spawn("read x; echo got-$x; exit 4", input="secret-value\n")
        lines = [line async for line in proc.lines()]
        status = await proc.wait()
    finally:
        await shell.close()
    assert lines == ["got-secret-value"] and status == 4 and proc.pgid is not None and proc.pgid > 1
    assert not any("secret-value" in c for c in server.commands)


async def test_key_file_problems_are_named(server, tmp_path):
    import subprocess

    locked_key = tmp_path / "locked"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "a passphrase", "-f", str(locked_key)], check=True)
    with pytest.raises(NodeFailure) as failure:
        await SshShell.connect(server.node(key=locked_key), server.options())
    assert failure.value.kind == "keyfile" and str(locked_key) in failure.value.message
    with pytest.raises(NodeFailure) as missing:
        await SshShell.connect(server.node(key=tmp_path / "absent"), server.options())
    assert missing.value.kind == "keyfile" and "absent" in missing.value.message


# --- one Protocol, two implementations: the same behaviour whether the node is here or over SSH ---


@pytest.fixture(params=["local", "ssh"])
async def any_shell(request, tmp_path):
    if request.param == "local":
        yield LocalShell(Node(name="here", host="http://127.0.0.1:8000", ssh="root@localhost"))
        return
    srv = await _Server(tmp_path).start()
    shell = await SshShell.connect(srv.node(), srv.options())
    try:
        yield shell
    finally:
        await shell.close()
        await srv.stop()


async def test_run_takes_an_argv_and_an_env_whose_values_never_execute(any_shell, tmp_path):
    marker = tmp_path / "PWNED"
    hostile = f"$(touch {marker}); `touch {marker}` ' \" \n"
    result = await any_shell.run(["sh", "-c", 'printf "%s|%s" "$C3_A" "$1"', "x", "a b"], env={"C3_A": hostile})
    assert result.ok and result.stdout == f"{hostile}|a b" and not marker.exists()
    from backend.errors import UsageError

    with pytest.raises(UsageError):
        await any_shell.run("true", env={f"X;touch {marker}": "1"})
    assert not marker.exists()


async def test_put_then_read_a_file_round_trips_bytes_and_reads_are_bounded(any_shell, tmp_path):
    path = str(tmp_path / "sub" / "it's a file")
    data = bytes(range(256)) * 4
    await any_shell.put_file(data, path, mode=0o640)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert await any_shell.read_file(path) == data
    assert await any_shell.read_file(path, limit=len(data)) == data
    with pytest.raises(NodeFailure, match="larger than"):
        await any_shell.read_file(path, limit=len(data) - 1)
    with pytest.raises(NodeFailure, match="cannot read") as missing:
        await any_shell.read_file(str(tmp_path / "absent"))
    assert missing.value.exit_code == 1


async def test_spawn_reports_its_process_group_and_merged_output(any_shell):
    proc = await any_shell.spawn('read s; echo "out-$s"; echo err >&2; exit 3', input="v\n")
    lines = [line async for line in proc.lines()]
    assert await proc.wait() == 3 and proc.returncode == 3
    assert sorted(lines) == ["err", "out-v"]
    assert proc.pgid is not None and proc.pgid > 1


async def test_a_timeout_is_a_node_failure_on_both(any_shell):
    with pytest.raises(NodeFailure) as failure:
        await any_shell.run("sleep 5; hang", timeout=0.5)
    assert failure.value.kind == "timeout"
