"""Test hosts on one machine: network namespaces, each with its own sshd and (optionally) dockerd.

A *host* is a network namespace joined to the root namespace by a veth pair: 10.213.N.1 on the
root side, 10.213.N.2 inside (and fdc3:213:N::1/::2 for IPv6), loopback up. Each host has DNS-style
names in /etc/hosts for the run (`c3h-<tag>-h1.test` → both addresses, `c3h-<tag>-h1-v6.test` → the
IPv6 one only; scripts/rig/names.py adds them and removes exactly those lines). Each host runs its own sshd (own host key, a generated
client key in its AuthorizedKeysFile, `SetEnv DOCKER_HOST=…` pointing at its own daemon) and, on
request, its own dockerd started with `nsenter --net=…` (not `ip netns exec`, which remounts /sys
and hides the cgroup mounts). Containers with `--network host` then live in that host's namespace,
reachable at 10.213.N.2 and not at this machine's 127.0.0.1.

All hosts share the file system; each gets its own folder. Names (namespace, veth, subnet N) are
chosen under a machine-wide lock from what is free, so parallel test sessions never collide.
Teardown stops only the processes this rig started (through their Popen) plus whatever provably lives
inside the namespaces it created (netns_cleanup.py), then deletes those namespaces and folders.

Usage from Python (the pytest plugin tests/plugins/hosts.py wraps this):

    rig = HostRig.create(count=2, docker=True)
    try:
        subprocess.run(rig.ssh_argv(rig.hosts[0], "docker info"), check=True)
    finally:
        rig.teardown()

By hand: `python3 scripts/rig/hosts.py up --count 2 --docker` (Ctrl-C tears down).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

try:
    from scripts.rig import names as rig_names
    from scripts.rig.netns_cleanup import (
        NETNS_DIR,
        reap_stale,
        remove_folder,
        stop_child,
        stop_netns,
        unmount_under,
    )
except ModuleNotFoundError:  # run as a file: `python3 scripts/rig/hosts.py up`
    import names as rig_names  # type: ignore[no-redef]
    from netns_cleanup import (
        NETNS_DIR,
        reap_stale,
        remove_folder,
        stop_child,
        stop_netns,
        unmount_under,
    )

__all__ = ["HostRig", "HostRigError", "TestHost", "missing_requirements", "reap_stale"]

SUBNET_PREFIX = "10.213"
SUBNET6_PREFIX = "fdc3:213"
LOCK_FILE = Path("/run/c3-test-hosts.lock")
SSHD = "/usr/sbin/sshd"


class HostRigError(RuntimeError):
    """The rig could not be built (missing tool, daemon that never answered)."""


def missing_requirements(docker: bool = False) -> str | None:
    """Why test hosts cannot be built here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "nsenter", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed"
    if not Path(SSHD).exists():
        return "openssh-server is not installed (/usr/sbin/sshd)"
    if docker and shutil.which("dockerd") is None:
        return "dockerd is not installed"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"`ip netns` does not work: {probe.stderr.strip()}"
    return None


def _run(argv: list[str], *, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise HostRigError(f"{' '.join(argv)}: {result.stderr.strip() or result.stdout.strip()}")
    return result


def _used_subnets() -> set[int]:
    used: set[int] = set()
    out = _run(["ip", "-o", "-4", "addr", "show"], check=False).stdout
    for match in re.finditer(rf"inet {re.escape(SUBNET_PREFIX)}\.(\d+)\.", out):
        used.add(int(match.group(1)))
    return used


def _wait(what: str, ready, deadline_s: float, proc: subprocess.Popen | None = None, log: Path | None = None) -> None:
    """Poll `ready()` until true; fail early if `proc` died, with the tail of its log."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if ready():
            return
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.05)
    tail = ""
    if log is not None and log.exists():
        tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-5:])
    state = f"exited {proc.returncode}" if proc is not None and proc.poll() is not None else f"not ready after {deadline_s:.0f}s"
    raise HostRigError(f"{what} {state}: {tail}")


def _tcp_open(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.5):
            return True
    except OSError:
        return False


def _docker_ping(sock: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(1)
            s.connect(str(sock))
            s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            return b"OK" in s.recv(4096)
    except OSError:
        return False


@dataclass
class TestHost:
    """One host: a namespace with an address, an sshd and maybe a dockerd."""

    __test__ = False  # not a pytest test class

    name: str
    """Short name inside the rig: h1, h2, …"""
    netns: str
    """Network namespace name (`ip netns`)."""
    subnet: int
    """N in 10.213.N.0/24."""
    folder: Path
    """This host's own folder (sshd config and keys, docker data, logs)."""
    docker_sock: Path | None = None
    """The host's own dockerd socket, when it has one."""
    pids: dict[str, int] = field(default_factory=dict)
    """Processes this rig started for the host: {"sshd": pid, "dockerd": pid}."""
    ssh_port: int = 22
    """Port sshd listens on (inside the namespace)."""
    user: str = "root"
    """SSH user."""
    tag: str = ""
    """The rig's tag (part of the host's DNS names)."""

    @property
    def address(self) -> str:
        """The host's address, inside its namespace."""
        return f"{SUBNET_PREFIX}.{self.subnet}.2"

    @property
    def address6(self) -> str:
        """The host's IPv6 address (a ULA), inside its namespace."""
        return f"{SUBNET6_PREFIX}:{self.subnet:x}::2"

    @property
    def dns_name(self) -> str:
        """A name that resolves (through /etc/hosts) to both of the host's addresses."""
        return rig_names.host_name(self.tag, self.name)

    @property
    def dns_name6(self) -> str:
        """A name that resolves to the host's IPv6 address only."""
        return rig_names.host_name(self.tag, self.name, v6=True)

    @property
    def ssh_target_by_name(self) -> str:
        """`USER@NAME`, the way people register their machines."""
        return f"{self.user}@{self.dns_name}"

    @property
    def gateway(self) -> str:
        """The root namespace's end of the veth pair."""
        return f"{SUBNET_PREFIX}.{self.subnet}.1"

    @property
    def ssh_target(self) -> str:
        """`USER@ADDRESS`, as `c3 node add --ssh` takes it."""
        return f"{self.user}@{self.address}"

    @property
    def docker_host(self) -> str | None:
        """`unix://…` for DOCKER_HOST (from this machine, no SSH)."""
        return f"unix://{self.docker_sock}" if self.docker_sock else None

    def nsenter(self, argv: list[str]) -> list[str]:
        """Prefix `argv` to run it inside this host's network namespace."""
        return ["nsenter", f"--net={NETNS_DIR / self.netns}", *argv]


@dataclass
class HostRig:
    """A set of test hosts sharing one client key and one known_hosts file."""

    folder: Path
    """Root folder of the rig (one sub-folder per host)."""
    client_key: Path
    """Private key (ed25519, no passphrase) every host accepts for root."""
    known_hosts: Path
    """known_hosts file with every host's key, for strict host-key checking."""
    hosts: list[TestHost] = field(default_factory=list)
    """The hosts, h1 first."""
    setup_seconds: float = 0.0
    """Wall time `create` took."""
    tag: str = ""
    """Random tag shared by the rig's namespace names."""
    _procs: dict[tuple[str, str], subprocess.Popen] = field(default_factory=dict, repr=False)

    @classmethod
    def create(cls, count: int = 2, *, docker: bool = False, base: Path | None = None) -> HostRig:
        """Build `count` hosts (sshd each, dockerd each when `docker`); tears down what it built on failure."""
        why = missing_requirements(docker)
        if why:
            raise HostRigError(why)
        started = time.monotonic()
        folder = Path(tempfile.mkdtemp(prefix="c3h-", dir=str(base) if base else "/tmp"))
        folder.chmod(0o755)
        tag = folder.name.removeprefix("c3h-")
        key = folder / "client_ed25519"
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"c3-test-{tag}", "-f", str(key)])
        rig = cls(folder=folder, client_key=key, known_hosts=folder / "known_hosts", tag=tag)
        rig.known_hosts.write_text("")
        reap_stale(folder.parent)
        rig_names.reap_stale_names()
        try:
            for i in range(1, count + 1):
                rig.hosts.append(rig._make_namespace(f"h{i}"))
                rig._record()
            rig_names.add_names(tag, folder, [e for h in rig.hosts for e in (
                (h.address, h.dns_name), (h.address6, h.dns_name), (h.address6, h.dns_name6))])
            for host in rig.hosts:
                rig._start_sshd(host)
                if docker:
                    rig._start_dockerd(host)
            for host in rig.hosts:
                _wait(
                    f"sshd on {host.name}",
                    lambda h=host: _tcp_open(h.address, h.ssh_port),
                    30,
                    proc=rig._procs[(host.name, "sshd")],
                    log=host.folder / "sshd.log",
                )
                if docker:
                    assert host.docker_sock is not None
                    _wait(
                        f"dockerd on {host.name}",
                        lambda h=host: _docker_ping(h.docker_sock),
                        90,
                        proc=rig._procs[(host.name, "dockerd")],
                        log=host.folder / "dockerd.log",
                    )
        except BaseException:
            rig.teardown()
            raise
        rig.setup_seconds = time.monotonic() - started
        return rig

    # --- building -------------------------------------------------------------------------

    def _record(self) -> None:
        """What a later session needs to clean up after this one if it is killed (SIGKILL, OOM)."""
        import json

        record = {"owner": os.getpid(), "netns": [h.netns for h in self.hosts], "veth": [f"c3v{h.subnet}o" for h in self.hosts]}
        (self.folder / "rig.json").write_text(json.dumps(record))

    def _make_namespace(self, name: str) -> TestHost:
        LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
        with open(LOCK_FILE, "a+") as lock:
            # Under a machine-wide lock: another session may be choosing a subnet right now.
            fcntl.flock(lock, fcntl.LOCK_EX)
            used = _used_subnets()
            subnet = next((n for n in range(1, 255) if n not in used), None)
            if subnet is None:
                raise HostRigError(f"no free {SUBNET_PREFIX}.N.0/24 subnet left")
            netns = f"c3h-{self.tag}-{name}"
            outer, inner = f"c3v{subnet}o", f"c3v{subnet}i"
            host = TestHost(name=name, netns=netns, subnet=subnet, folder=self.folder / name, tag=self.tag)
            host.folder.mkdir()
            _run(["ip", "netns", "add", netns])
            _run(["ip", "link", "add", outer, "type", "veth", "peer", "name", inner])
            _run(["ip", "link", "set", inner, "netns", netns])
            _run(["ip", "addr", "add", f"{host.gateway}/24", "dev", outer])
            _run(["ip", "link", "set", outer, "up"])
            _run(["ip", "netns", "exec", netns, "ip", "addr", "add", f"{host.address}/24", "dev", inner])
            # IPv6 too, without duplicate-address detection (a tentative address cannot be bound yet).
            _run(["ip", "-6", "addr", "add", f"{SUBNET6_PREFIX}:{subnet:x}::1/64", "dev", outer, "nodad"])
            _run(["ip", "netns", "exec", netns, "ip", "-6", "addr", "add", f"{host.address6}/64", "dev", inner, "nodad"])
            _run(["ip", "netns", "exec", netns, "ip", "link", "set", inner, "up"])
            _run(["ip", "netns", "exec", netns, "ip", "link", "set", "lo", "up"])
        return host

    def _start_sshd(self, host: TestHost) -> None:
        d = host.folder
        hostkey = d / "ssh_host_ed25519_key"
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{host.name}-hostkey", "-f", str(hostkey)])
        authorized = d / "authorized_keys"
        authorized.write_text(Path(f"{self.client_key}.pub").read_text())
        docker_sock = d / "docker.sock"
        # A locked root ("!" in shadow) refuses keys unless PAM handles accounts.
        use_pam = "yes" if _root_locked() else "no"
        lines = [
            f"ListenAddress {host.address}",
            f"ListenAddress {host.address6}",
            f"Port {host.ssh_port}",
            f"HostKey {hostkey}",
            f"PidFile {d / 'sshd.pid'}",
            f"AuthorizedKeysFile {authorized}",
            "StrictModes no",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            f"UsePAM {use_pam}",
            "PrintMotd no",
            "MaxStartups 100:30:200",
            "MaxSessions 50",
            "LogLevel VERBOSE",
            # Its own $HOME too: hosts share this machine's file system, and /root is not theirs.
            f"SetEnv DOCKER_HOST=unix://{docker_sock} HOME={d / 'home'}",
            "Subsystem sftp internal-sftp",
        ]
        (d / "sshd_config").write_text("\n".join(lines) + "\n")
        (d / "home").mkdir(mode=0o700, exist_ok=True)
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        log = d / "sshd.log"
        proc = subprocess.Popen(
            host.nsenter([SSHD, "-D", "-f", str(d / "sshd_config"), "-E", str(log)]),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(log, "ab"),
            start_new_session=True,
        )
        host.pids["sshd"] = proc.pid
        self._procs[(host.name, "sshd")] = proc
        pub = Path(f"{hostkey}.pub").read_text().split()
        with open(self.known_hosts, "a") as fh:
            # As OpenSSH records a host reached by name (CheckHostIP): the name and its addresses.
            fh.write(f"{host.address} {pub[0]} {pub[1]}\n")
            fh.write(f"{host.dns_name},{host.dns_name6},{host.address6} {pub[0]} {pub[1]}\n")

    def _start_dockerd(self, host: TestHost) -> None:
        d = host.folder
        host.docker_sock = d / "docker.sock"
        (d / "docker-data").mkdir()
        # tmpfs: loading and deleting a 200 MB image on a busy disk took ~20 s per host; RAM is instant.
        _run(["mount", "-t", "tmpfs", "-o", "size=4g,mode=0711", f"c3h-{self.tag}-{host.name}", str(d / "docker-data")], check=False)
        (d / "daemon.json").write_text("{}\n")
        log = d / "dockerd.log"
        proc = subprocess.Popen(
            host.nsenter(
                [
                    "dockerd",
                    "--data-root", str(d / "docker-data"),
                    "--exec-root", str(d / "docker-exec"),
                    "-H", f"unix://{host.docker_sock}",
                    "--pidfile", str(d / "dockerd.pid"),
                    # Its own (empty) config: /etc/docker/daemon.json belongs to the machine's daemon.
                    "--config-file", str(d / "daemon.json"),
                    "--bridge=none",
                    "--iptables=false",
                    "--ip6tables=false",
                    "--ip-masq=false",
                    "--userland-proxy=false",
                ]
            ),
            stdin=subprocess.DEVNULL,
            stdout=open(log, "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        host.pids["dockerd"] = proc.pid
        self._procs[(host.name, "dockerd")] = proc

    # --- using ----------------------------------------------------------------------------

    def ssh_options(self) -> list[str]:
        """OpenSSH client options: this rig's key, strict checking against this rig's known_hosts."""
        return [
            "-i", str(self.client_key),
            "-o", "IdentitiesOnly=yes",
            "-o", f"UserKnownHostsFile={self.known_hosts}",
            "-o", "StrictHostKeyChecking=yes",
            "-o", "BatchMode=yes",
            "-o", "ConnectTimeout=10",
            "-o", "LogLevel=ERROR",
        ]

    def ssh_argv(self, host: TestHost, command: str) -> list[str]:
        """`ssh … root@10.213.N.2 COMMAND` as a user would type it."""
        return ["ssh", *self.ssh_options(), "-p", str(host.ssh_port), host.ssh_target, command]

    def load_image(self, host: TestHost, image: str, *, source_docker_host: str | None = None) -> float:
        """Ship `image` to `host` as a user would: `docker save IMAGE | ssh host docker load`. Returns seconds."""
        started = time.monotonic()
        env = dict(os.environ)
        if source_docker_host:
            env["DOCKER_HOST"] = source_docker_host
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        load = subprocess.run(self.ssh_argv(host, "docker load -q"), stdin=save.stdout, capture_output=True, text=True, timeout=600)
        assert save.stdout is not None
        save.stdout.close()
        save_err = save.stderr.read().decode(errors="replace") if save.stderr else ""
        if save.wait(timeout=60) != 0:
            raise HostRigError(f"docker save {image}: {save_err.strip()}")
        if load.returncode != 0:
            raise HostRigError(f"docker load on {host.name}: {load.stderr.strip()}")
        return time.monotonic() - started

    def ensure_image(self, image: str, *, source_docker_host: str | None = None) -> dict[str, float]:
        """Load `image` on every host that lacks it; seconds per host (0 when already there)."""
        from concurrent.futures import ThreadPoolExecutor

        def one(host: TestHost) -> float:
            present = subprocess.run(self.ssh_argv(host, f"docker image inspect {image} >/dev/null 2>&1"), capture_output=True)
            return 0.0 if present.returncode == 0 else self.load_image(host, image, source_docker_host=source_docker_host)

        with ThreadPoolExecutor(max_workers=len(self.hosts) or 1) as pool:
            return dict(zip([h.name for h in self.hosts], pool.map(one, self.hosts), strict=True))

    # --- tearing down ---------------------------------------------------------------------

    def teardown(self) -> None:
        """Stop what this rig started, delete its namespaces and its folder. Never raises.

        Children are stopped through their Popen (never by a bare pid), everything else only when
        it provably sits inside one of this rig's namespaces (see netns_cleanup).
        """
        for host in self.hosts:
            if host.docker_sock is not None and "dockerd" in host.pids:
                # Remove containers first: dockerd's own shutdown waits out each stop timeout.
                with contextlib.suppress(Exception):
                    ids = _run(["docker", "-H", f"unix://{host.docker_sock}", "ps", "-aq"], check=False, timeout=15).stdout.split()
                    if ids:
                        _run(["docker", "-H", f"unix://{host.docker_sock}", "rm", "-f", *ids], check=False, timeout=60)
            for what in ("dockerd", "sshd"):
                host.pids.pop(what, None)
                proc = self._procs.pop((host.name, what), None)
                if proc is not None:
                    stop_child(proc, grace_s=20 if what == "dockerd" else 5)
            # Anything still inside the namespace was started there by us (containers, ssh sessions).
            stop_netns(host.netns)
            unmount_under(host.folder)
            _run(["ip", "link", "del", f"c3v{host.subnet}o"], check=False)
            _run(["ip", "netns", "del", host.netns], check=False)
        with contextlib.suppress(OSError):
            rig_names.remove_names(self.tag)
        unmount_under(self.folder)
        remove_folder(self.folder)
        shutil.rmtree(self.folder, ignore_errors=True)
        self.hosts = []


def _root_locked() -> bool:
    try:
        for line in Path("/etc/shadow").read_text().splitlines():
            if line.startswith("root:"):
                return line.split(":")[1].startswith("!")
    except OSError:
        pass
    return False


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Build test hosts in network namespaces and keep them until Ctrl-C.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up")
    up.add_argument("--count", type=int, default=2)
    up.add_argument("--docker", action="store_true")
    args = parser.parse_args(argv)
    rig = HostRig.create(count=args.count, docker=args.docker)
    try:
        print(f"rig {rig.folder} ready in {rig.setup_seconds:.1f}s; key {rig.client_key}; known_hosts {rig.known_hosts}")
        for host in rig.hosts:
            print(f"  {host.name}: ssh {' '.join(rig.ssh_options())} {host.ssh_target}  docker: {host.docker_host or '-'}")
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        rig.teardown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
