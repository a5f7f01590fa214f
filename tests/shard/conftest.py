"""Fixtures for the shard integration tests: two netns test hosts (NODES' rig) joined by a direct
"cluster link", a cached Ray venv on the shared file system, and a way to run `c3` on the head.

Topology (like two DGX Sparks with a QSFP cable between them):

    root ns ── 10.213.N.0/24 ── h1 (head)        h1 ══ 10.213.L.0/24 (cluster link) ══ h2
    root ns ── 10.213.M.0/24 ── h2 (worker)

The hosts reach each other only over the link; h1 also routes h2's SSH address over it, so the
head drives h2 over real SSH. `c3` runs inside h1's namespace, so local detection sees the head's
address, just as on a real head node.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RAY_VERSION = "2.60.0"
RAY_VENV = ROOT / ".rig" / f"shard-ray-{RAY_VERSION}"
RAY_WHEELS = ROOT / ".rig" / f"ray-wheels-{RAY_VERSION}"
RAY_PORT = 6380  # outside Ray's worker port range 10002–19999
API_PORT = 8000


def _ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True, text=True, timeout=30)


@dataclass
class ShardRig:
    """Two hosts with a cluster link, and helpers to drive c3 on the head."""

    rig: object
    head: object
    worker: object
    link_subnet: int
    link_names: tuple[str, str]
    folder: Path

    @property
    def head_link(self) -> str:
        return f"10.213.{self.link_subnet}.1"

    @property
    def worker_link(self) -> str:
        return f"10.213.{self.link_subnet}.2"

    @property
    def ray(self) -> str:
        return str(RAY_VENV / "bin" / "ray")

    @property
    def python(self) -> str:
        return str(RAY_VENV / "bin" / "python")

    def register(self, home: Path | None = None) -> None:
        """Register the hosts as nodes a (head) and b in this test's C3_HOME (or in `home`), by their
        DNS names, as people register their machines."""
        from backend.nodes.registry import add_node

        for name, host in (("a", self.head), ("b", self.worker)):
            add_node(name, f"http://{host.dns_name}:{API_PORT}", host.ssh_target_by_name, ssh_key=str(self.rig.client_key),
                     path=home / "nodes.json" if home else None)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("C3_SHARD")}
        env.update(C3_KNOWN_HOSTS=str(self.rig.known_hosts), PYTHONUNBUFFERED="1")
        env.update(extra)  # may name another C3_KNOWN_HOSTS
        return env

    def argv(self, *args: str) -> list[str]:
        return ["nsenter", f"--net=/var/run/netns/{self.head.netns}", sys.executable, "-m", "c3", *args]

    def c3(self, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
        """Run `c3 ARGS` on the head (inside h1's namespace) and wait for it."""
        return subprocess.run(self.argv(*args), check=False, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=self.env(**env))

    def c3_background(self, *args: str, log: Path, **env: str) -> subprocess.Popen:
        """Start `c3 ARGS` on the head in the background, output to `log`."""
        return subprocess.Popen(self.argv(*args), stdout=open(log, "wb"), stderr=subprocess.STDOUT, cwd=ROOT, env=self.env(**env),
                                start_new_session=True)

    def netns_pids(self) -> dict[str, list[tuple[int, str]]]:
        """Every process inside each host's namespace, with its command line."""
        found: dict[str, list[tuple[int, str]]] = {}
        for host in (self.head, self.worker):
            out = subprocess.run(["ip", "netns", "pids", host.netns], check=False, capture_output=True, text=True, timeout=30).stdout
            procs = []
            for pid in out.split():
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                except OSError:
                    continue
                procs.append((int(pid), cmd))
            found[host.name] = procs
        return found

    def leftovers(self) -> dict[str, list[tuple[int, str]]]:
        """Processes in either namespace that a shard started: Ray's, the stand-ins, anything tagged
        C3_SHARD. (Other tests share these hosts; what they run there is not ours to judge.)"""
        mine = (str(RAY_VENV), str(self.folder), "raylet", "gcs_server", "ray::", "/ray/")

        def ours(pid: int, cmd: str) -> bool:
            if any(m in cmd for m in mine):
                return True
            try:
                return b"C3_SHARD=" in Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:
                return False

        return {name: [(pid, cmd) for pid, cmd in procs if ours(pid, cmd)] for name, procs in self.netns_pids().items()}

    def kill_leftovers(self) -> None:
        """Last resort after a failed test: stop what is still running inside the two namespaces
        (each pid pinned by a pidfd and checked to be inside that namespace before any signal)."""
        from scripts.rig.netns_cleanup import stop_in_netns

        netns = {h.name: h.netns for h in (self.head, self.worker)}
        for name, procs in self.leftovers().items():
            for pid, _ in procs:
                stop_in_netns(pid, netns[name], grace_s=1)


SHARD_LOCK = Path("/run/c3-test-shard.lock")


@pytest.fixture(scope="module")
def machine_wide_shard_lock():
    """One shard module at a time on this machine. Test hosts share one pid namespace, so `ray stop`
    and `shard stop` (which finds c3's processes through /proc/*/environ) on a test host reach every
    test session's Ray and shard processes, not only this one's."""
    SHARD_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(SHARD_LOCK, "a+") as lock:
        deadline = time.monotonic() + 1800
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"another test session held {SHARD_LOCK} for 30 min")
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
def shard_rig(ssh_hosts, tmp_path_factory, require_service, machine_wide_shard_lock):
    """NODES' two ssh test hosts plus a cluster link between them (removed again afterwards)."""
    h1, h2 = ssh_hosts.hosts[:2]
    used = {h1.subnet, h2.subnet}
    link = next(n for n in range(250, 200, -1) if n not in used)
    a, b = f"c3s{h1.subnet}l{h2.subnet}a", f"c3s{h1.subnet}l{h2.subnet}b"
    subprocess.run(["ip", "link", "del", a], check=False, capture_output=True)
    _ip("link", "add", a, "type", "veth", "peer", "name", b)
    try:
        _ip("link", "set", a, "netns", h1.netns)
        _ip("link", "set", b, "netns", h2.netns)
        _ip("-n", h1.netns, "addr", "add", f"10.213.{link}.1/24", "dev", a)
        _ip("-n", h2.netns, "addr", "add", f"10.213.{link}.2/24", "dev", b)
        _ip("-n", h1.netns, "link", "set", a, "up")
        _ip("-n", h2.netns, "link", "set", b, "up")
        # The head reaches the worker's sshd over the link (as a Spark reaches its twin over QSFP).
        _ip("-n", h1.netns, "route", "add", f"{h2.address}/32", "via", f"10.213.{link}.2")
    except BaseException:
        subprocess.run(["ip", "-n", h1.netns, "link", "del", a], check=False, capture_output=True)
        raise
    rig = ShardRig(rig=ssh_hosts, head=h1, worker=h2, link_subnet=link, link_names=(a, b), folder=tmp_path_factory.mktemp("shard"))
    rig.folder.chmod(0o755)
    try:
        yield rig
    finally:
        rig.kill_leftovers()
        subprocess.run(["ip", "-n", h1.netns, "link", "del", a], check=False, capture_output=True)


@pytest.fixture(scope="module")
def ray_venv(require_service):
    """A venv for Ray on the shared file system, kept under .rig/ between runs (≈ 400 MB), and the
    wheels to fill it (≈ 110 MB): the test hosts cannot reach PyPI, so this machine downloads them
    once and `install-ray --wheelhouse` installs from that folder, as on an air-gapped node."""
    python = RAY_VENV / "bin" / "python"
    if not python.exists():
        RAY_VENV.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(RAY_VENV)], check=True, timeout=300)
    stamp = RAY_WHEELS / ".complete"
    if not stamp.exists():
        RAY_WHEELS.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([str(python), "-m", "pip", "download", "-q", "-d", str(RAY_WHEELS), f"ray[default]=={RAY_VERSION}"],
                              check=False, capture_output=True, text=True, timeout=900)
        require_service("pypi", done.returncode == 0, f"could not download ray[default]=={RAY_VERSION} wheels: {done.stderr[-500:]}")
        stamp.write_text("ok\n")
    return RAY_VENV


@pytest.fixture(scope="module")
def ray_installed(shard_rig, ray_venv, tmp_path_factory):
    """`c3 shard install-ray` on both hosts (the real command), into the shared cached venv."""
    home = tmp_path_factory.mktemp("install-ray-home")
    shard_rig.register(home)
    started = time.monotonic()
    result = shard_rig.c3("shard", "install-ray", "--nodes", "a,b", "--python", shard_rig.python, "--ray-version", RAY_VERSION,
                          "--wheelhouse", str(RAY_WHEELS), timeout=900, C3_HOME=str(home))
    return result, time.monotonic() - started


def write_script(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(0o755)
    return str(path)




def get(url: str, body: dict | None = None, timeout: float = 5) -> dict | None:
    """GET (or POST `body` as JSON) and decode the JSON answer; None when nothing usable came back."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return json.loads(r.read())
    except (OSError, ValueError):
        return None


def parts_of(shard_rig: ShardRig, backend: str, *extra: str) -> tuple[int, dict[str, dict]]:
    """`c3 shard status --backend BACKEND --json` on the head: its exit code and its parts by node."""
    r = shard_rig.c3("shard", "status", "--nodes", "a,b", "--backend", backend, *extra, "--json")
    return r.returncode, {p["node"]: p for p in json.loads(r.stdout)["parts"]}


def get_in(shard_rig: ShardRig, url: str, body: dict | None = None, timeout: float = 5) -> dict | None:
    """`get`, from inside the head's namespace: for addresses only the hosts reach (the cluster link)."""
    script = ("import json, sys, urllib.request\n"
              "url, body, timeout = json.loads(sys.argv[1])\n"
              "data = None if body is None else json.dumps(body).encode()\n"
              "req = urllib.request.Request(url, data=data, headers={'Content-Type': 'application/json'})\n"
              "try:\n"
              "    with urllib.request.urlopen(req, timeout=timeout) as r:\n"
              "        print(r.read().decode())\n"
              "except OSError:\n"
              "    pass\n")
    argv = ["nsenter", f"--net=/var/run/netns/{shard_rig.head.netns}", sys.executable, "-c", script, json.dumps([url, body, timeout])]
    out = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout + 30).stdout
    try:
        return json.loads(out) if out.strip() else None
    except ValueError:
        return None


def stop_c3(proc: subprocess.Popen) -> None:
    """Stop a `c3` this test started, as Ctrl+C does (SIGINT), then by its pid if it does not end."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
