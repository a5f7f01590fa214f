"""The test-host rig itself: strict SSH into each namespace, each host's own dockerd."""

from __future__ import annotations

import subprocess


def _ssh(rig, host, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(rig.ssh_argv(host, command), capture_output=True, text=True, timeout=60)


def test_each_host_answers_ssh_with_strict_host_keys(ssh_hosts):
    addresses = set()
    for host in ssh_hosts.hosts:
        result = _ssh(ssh_hosts, host, "ip -o -4 addr show")
        assert result.returncode == 0, result.stderr
        assert host.address in result.stdout
        addresses.add(host.address)
    assert len(addresses) == 2


def test_wrong_host_key_is_refused(ssh_hosts, tmp_path):
    host = ssh_hosts.hosts[0]
    other = ssh_hosts.hosts[1]
    # known_hosts that pins h1's address to h2's key: strict checking must refuse.
    lines = ssh_hosts.known_hosts.read_text().splitlines()
    key_of_other = next(line for line in lines if line.startswith(other.address + " ")).split(" ", 1)[1]
    bad = tmp_path / "known_hosts"
    bad.write_text(f"{host.address} {key_of_other}\n")
    argv = ssh_hosts.ssh_argv(host, "true")
    argv[argv.index(f"UserKnownHostsFile={ssh_hosts.known_hosts}")] = f"UserKnownHostsFile={bad}"
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert result.returncode == 255
    assert "host key" in result.stderr.lower() or "verification failed" in result.stderr.lower()


def test_each_host_has_its_own_dockerd(docker_hosts):
    roots = set()
    for host in docker_hosts.hosts:
        result = _ssh(docker_hosts, host, "echo $DOCKER_HOST; echo $HOME; docker info --format '{{.DockerRootDir}}'")
        assert result.returncode == 0, result.stderr
        sock, home, root_dir = result.stdout.strip().splitlines()
        assert sock == host.docker_host and home == str(host.folder / "home")
        assert root_dir.startswith(str(host.folder))
        roots.add(root_dir)
    assert len(roots) == 2


def test_a_rig_whose_session_died_is_reaped(require_service):
    from scripts.rig.hosts import HostRig, missing_requirements, reap_stale

    why = missing_requirements()
    require_service("netns", why is None, why or "")
    rig = HostRig.create(count=1)
    try:
        host = rig.hosts[0]
        sshd = host.pids["sshd"]
        record = rig.folder / "rig.json"
        # Pretend the owning session was killed: a dead owner pid in its record.
        dead = subprocess.Popen(["true"])
        dead.wait()
        record.write_text(record.read_text().replace(f'"owner": {__import__("os").getpid()}', f'"owner": {dead.pid}'))
        assert rig.folder in reap_stale(rig.folder.parent)
        assert not rig.folder.exists()
        assert host.netns not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        from pathlib import Path

        assert not Path(f"/proc/{sshd}").exists()  # its sshd (inside the namespace) was stopped
    finally:
        rig.teardown()


def test_hosts_answer_by_name_and_over_ipv6_with_strict_host_keys(ssh_hosts):
    """The rig's DNS-style names resolve through glibc (getent) and OpenSSH reaches each host by its
    name and by its IPv6-only name, strict host-key checking on."""
    import socket

    for host in ssh_hosts.hosts:
        resolved = {info[4][0] for info in socket.getaddrinfo(host.dns_name, 22)}
        assert resolved == {host.address, host.address6}
        assert {info[4][0] for info in socket.getaddrinfo(host.dns_name6, 22)} == {host.address6}
        for name in (host.dns_name, host.dns_name6):
            argv = ssh_hosts.ssh_argv(host, "echo here")
            argv[argv.index(host.ssh_target)] = f"{host.user}@{name}"
            result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            assert result.returncode == 0 and result.stdout.strip() == "here", (name, result.stderr)


def test_rig_names_are_removed_exactly(tmp_path):
    """Only the lines a rig added leave /etc/hosts at teardown; a dead rig's lines are reaped."""
    from scripts.rig import names

    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n10.0.0.9 mine.lan  # not ours\n")
    live, dead = tmp_path / "c3h-live", tmp_path / "c3h-dead"
    live.mkdir()
    names.add_names("live", live, [("10.213.1.2", "a.test")], path=hosts)
    names.add_names("dead", dead, [("10.213.2.2", "b.test")], path=hosts)
    names.reap_stale_names(path=hosts)
    assert "b.test" not in hosts.read_text() and "a.test" in hosts.read_text()
    names.remove_names("live", path=hosts)
    assert hosts.read_text() == "127.0.0.1 localhost\n10.0.0.9 mine.lan  # not ours\n"
