"""Property suite (issue 16): every file c3 reads, filled by Hypothesis with hostile content, and the file
system around it in hostile states — and whatever happens, `c3` keeps its contract:

- exit 0, 1, 2 or 3, and the class is right: a file c3 cannot parse is 2, a file system that refuses is 3;
- on failure, exactly one `c3: error: …` line (plus at most one `hint: …`) and never a traceback;
- no partial write: a failed command leaves C3_HOME byte for byte as it was, a successful write leaves
  a file c3 can read again;
- at most 5 s of CPU and 500 MB of memory per command (the child's own rusage; the wall-clock
  deadline is looser only because the machine is shared), and no secret from the file is echoed.

Examples per property: `C3_HYPOTHESIS_EXAMPLES` (default 12) — modest, so CI runs this in minutes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from tests.hostile.helpers import BOMB, C3, bomb_estate, fill, remount_readonly, small_tmpfs, snapshot

MEASURED = Path(__file__).with_name("measured.py")
EXAMPLES = int(os.environ.get("C3_HYPOTHESIS_EXAMPLES", "12"))
CPU_S, RSS_MB, WALL_S = 5.0, 500, 30.0
SECRET = "hunter2-s3cr3t"
# No shrinking: every step runs real processes, and shrinking one failure took minutes; the failing
# example is printed as drawn.
PHASES = [Phase.explicit, Phase.reuse, Phase.generate]
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, derandomize=bool(os.environ.get("CI")), phases=PHASES,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])

RIG = 'gpus:\n  - {name: "NVIDIA GeForce RTX 3090", total_mib: 24576, sm: "8.6"}\n  - {name: "NVIDIA GeForce RTX 3090", total_mib: 24576, sm: "8.6"}\n'
ESTATE = "schema_version: 1\nestate:\n  - name: chat\n    slug: vllm/qwen3-8b\n    gpus: [0]\n    port: 28140\n"
NODES = json.dumps({"schema_version": 1, "nodes": [{"name": "here", "host": "http://127.0.0.1:1", "ssh": "root@127.0.0.1:1"}]})


# --- running c3 and judging it ----------------------------------------------------------------


def c3(base: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str, float, float]:
    """(exit code, stdout, stderr, CPU seconds, peak RSS MB) of `c3 ARGS` with C3_HOME=base/home.

    CPU and memory are that child's own (wait4 in the small launcher `measured.py`: a child spawned
    straight from this grown pytest process would report pytest's peak RSS as its own), so neither
    other tenants of the machine nor this test process count.
    """
    full = dict(os.environ, C3_HOME=str(base / "home"), C3_STATE=str(base / "state"), C3_RIG=str(base / "rig.yaml"), C3_RUNTIME="sim")
    full.update(env or {})
    report = base / f".rusage-{threading.get_ident()}"
    report.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-S", str(MEASURED), str(report), C3, *args], env=full, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out_b, err_b = proc.communicate(timeout=WALL_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"c3 {' '.join(args)} ran past {WALL_S} s")
    status, user, system, maxrss_kb = report.read_text(encoding="ascii").split()
    report.unlink()
    out, err = out_b.decode("utf-8", "replace"), err_b.decode("utf-8", "replace")
    return os.waitstatus_to_exitcode(int(status)), out, err, float(user) + float(system), int(maxrss_kb) / 1024


def judge(base: Path, *args: str, allowed: set[int], env: dict[str, str] | None = None, writes: bool = False) -> int:
    home = base / "home"
    before = snapshot(home)
    rc, out, err, cpu, rss = c3(base, *args, env=env)
    where = f"c3 {' '.join(args)} → {rc}\n{err[-1500:]}"
    assert "Traceback" not in err and "Traceback" not in out, where
    assert rc in allowed, where
    assert cpu <= CPU_S and rss <= RSS_MB, f"{where}\nCPU {cpu:.2f} s, RSS {rss:.0f} MB"
    assert SECRET not in out + err, where
    if rc != 0:
        lines = err.strip().splitlines()
        assert lines and lines[0].startswith("c3: error: ") and len(lines[0]) < 2000, where
        assert all(line.startswith("hint: ") for line in lines[1:]) and len(lines) <= 2, where
        if writes:
            assert snapshot(home) == before, f"partial write by {where}"
    return rc


@pytest.fixture
def base(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("prop")


def fresh(base: Path) -> Path:
    """A clean home with an estate, one node and a rig, replaced for every example."""
    for name in ("home", "state"):
        shutil.rmtree(base / name, ignore_errors=True)
        (base / name).mkdir()
    (base / "rig.yaml").write_text(RIG)
    (base / "home" / "estate.yml").write_text(ESTATE)
    (base / "home" / "nodes.json").write_text(NODES)
    return base / "home"


# --- hostile content ----------------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=24), st.sampled_from(["vllm/qwen3-8b", "custom/x", "0", "-1", "65536", "yes", "~", "2024-13-45"]))
anything = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=16)
ports = st.one_of(st.integers(-5, 70000), st.just(10**5000 // 10**4990), st.text(max_size=6))


def mutations(text: str) -> st.SearchStrategy[bytes]:
    """`text` as written, or broken in the ways people and tools break files."""
    raw = text.encode()
    return st.one_of(
        st.just(raw),
        st.integers(0, max(0, len(raw) - 1)).map(lambda n: raw[:n]),                         # truncated mid-write
        st.just(BOMB.encode() + raw),                                                          # alias bomb on top
        st.just(bomb_estate().encode()),                                                       # ... and used inside an entry
        st.just(raw + raw),                                                                    # every key twice
        st.just(b"[" * 20000 + b"]" * 20000),                                                  # nesting
        st.just(b"x: " + b"9" * 5001 + b"\n"),                                                 # a 5,001-digit integer
        st.just(b"!!python/object/apply:os.system ['true']\n"),                                # a tag
        st.binary(max_size=64),                                                                # noise
        st.just(b"\xef\xbb\xbf" + raw), st.just(raw.replace(b"\n", b"\r\n")), st.just(raw + b"\x00"),
    )


def estate_docs() -> st.SearchStrategy[str]:
    pod = st.fixed_dictionaries(
        {"name": st.one_of(st.sampled_from(["chat", "two", "Chat", "x" * 70]), st.text(max_size=8)),
         "slug": st.one_of(st.just("vllm/qwen3-8b"), scalars), "gpus": st.one_of(st.lists(st.integers(-1, 9), max_size=3), scalars),
         "port": ports},
        optional={"compose": scalars, "uuids": anything, "extra": anything})
    doc = st.fixed_dictionaries({"schema_version": st.one_of(st.just(1), scalars), "estate": st.one_of(st.lists(pod, max_size=4), anything)},
                                optional={"rig": anything, "updated": scalars})
    return doc.map(lambda d: yaml.safe_dump(d, sort_keys=False, allow_unicode=True, width=1 << 20))


def node_docs() -> st.SearchStrategy[str]:
    hosts = st.one_of(
        st.builds(lambda h, p: f"http://{h}:{p}", st.sampled_from(["127.0.0.1", "bad host", "[::1]", "x" * 300, "ex.com"]), ports),
        st.just(f"http://admin:{SECRET}@127.0.0.1:8000"), st.text(max_size=20))
    node = st.fixed_dictionaries({"name": st.one_of(st.sampled_from(["here", "n1", "N1"]), st.text(max_size=8)), "host": hosts,
                                  "ssh": st.one_of(st.just("root@127.0.0.1"), st.text(max_size=16), st.just("root@h:99999"))},
                                 optional={"ssh_key": scalars})
    doc = st.fixed_dictionaries({"schema_version": st.one_of(st.just(1), scalars), "nodes": st.one_of(st.lists(node, max_size=3), anything)})
    return doc.map(json.dumps)


def catalog_docs() -> st.SearchStrategy[str]:
    entry = st.fixed_dictionaries({"slug": st.one_of(st.just("custom/mine"), scalars), "engine": st.one_of(st.just("custom"), scalars),
                                   "image": st.one_of(st.just("img:1"), scalars), "container_port": ports, "tp": st.one_of(st.integers(-1, 9), scalars)},
                                  optional={"command": anything, "max_model_len": anything})
    return st.fixed_dictionaries({"entries": st.one_of(st.lists(entry, max_size=3), anything)}).map(lambda d: yaml.safe_dump(d, allow_unicode=True))


def yaml_docs() -> st.SearchStrategy[str]:
    return anything.map(lambda d: yaml.safe_dump(d, allow_unicode=True))


def rig_docs() -> st.SearchStrategy[str]:
    gpu = st.fixed_dictionaries({"name": st.one_of(st.just("NVIDIA GeForce RTX 3090"), scalars), "total_mib": ports, "sm": st.one_of(st.just("8.6"), scalars)})
    return st.fixed_dictionaries({"gpus": st.one_of(st.lists(gpu, max_size=3), anything)}).map(lambda d: yaml.safe_dump(d, allow_unicode=True))


# --- properties over file content ---------------------------------------------------------------

READ_OK = {0, 1, 2}  # never 3: nothing here is an environment problem


@PROPERTY
@given(data=st.data())
def test_any_estate(base, data):
    home = fresh(base)
    (home / "estate.yml").write_bytes(data.draw(estate_docs().flatmap(mutations)))
    judge(base, "pod", "list", "--json", allowed={0, 2})
    judge(base, "pod", "validate", allowed=READ_OK)
    rc = judge(base, "pod", "create", "new", "--gpus", "1", "--slug", "vllm/qwen3-8b", "--port", "28141", "--force", allowed={0, 1, 2}, writes=True)
    if rc == 0:  # what c3 wrote, c3 reads
        assert judge(base, "pod", "list", "--json", allowed={0}) == 0
    judge(base, "pod", "rm", "chat", allowed={0, 1, 2}, writes=True)


@PROPERTY
@given(data=st.data())
def test_any_nodes_json(base, data):
    home = fresh(base)
    (home / "nodes.json").write_bytes(data.draw(node_docs().flatmap(mutations)))
    judge(base, "node", "ls", "--json", allowed={0, 2})
    rc = judge(base, "node", "add", "n9", "--host", "http://127.0.0.1:9", "--ssh", "root@127.0.0.1", allowed={0, 1, 2}, writes=True)
    if rc == 0:
        assert judge(base, "node", "ls", allowed={0}) == 0
    judge(base, "node", "rm", "here", allowed={0, 1, 2}, writes=True)


@PROPERTY
@given(data=st.data())
def test_any_catalog_d_file(base, data):
    home = fresh(base)
    (home / "catalog.d").mkdir()
    (home / "catalog.d" / "mine.yaml").write_bytes(data.draw(catalog_docs().flatmap(mutations)))
    judge(base, "catalog", "--json", allowed={0, 2})
    judge(base, "pod", "validate", allowed=READ_OK)


@PROPERTY
@given(data=st.data(), kind=st.sampled_from(["recipes", "profile", "rig"]))
def test_any_recipe_profile_or_rig_file(base, data, kind):
    home = fresh(base)
    if kind == "recipes":
        (home / "recipes.d").mkdir()
        (home / "recipes.d" / "mine.yaml").write_bytes(data.draw(yaml_docs().flatmap(mutations)))
        judge(base, "recipes", "list", "--json", allowed={0, 2})
    elif kind == "profile":
        (home / "profiles").mkdir()
        (home / "profiles" / "p.yaml").write_bytes(data.draw(yaml_docs().flatmap(mutations)))
        judge(base, "profile", "ls", allowed={0, 1, 2})
        judge(base, "profile", "env", "p", allowed={1, 2})
    else:
        (base / "rig.yaml").write_bytes(data.draw(rig_docs().flatmap(mutations)))
        judge(base, "gpus", "--json", allowed={0, 2})


# --- properties over file-system states -----------------------------------------------------------

FILES = {"estate.yml": ("pod", "list"), "nodes.json": ("node", "ls"), "catalog.d/mine.yaml": ("catalog",)}


def _make(path: Path, state: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    if state == "missing":
        return
    if state == "directory":
        path.mkdir()
    elif state == "fifo":
        os.mkfifo(path)
    elif state == "device":
        path.symlink_to("/dev/zero")
    elif state == "dangling-link":
        path.symlink_to(path.parent / "nowhere")
    elif state == "link-loop":
        path.symlink_to(path)
    elif state == "huge":
        with open(path, "wb") as fh:
            fh.truncate(64 * 1024 * 1024)  # sparse: costs no disk


@pytest.mark.parametrize("state", ["missing", "directory", "fifo", "device", "dangling-link", "link-loop", "huge"])
@pytest.mark.parametrize("name", sorted(FILES))
def test_any_file_state(base, name, state):
    """Every state for every file: a finite set, so all of it rather than a sample."""
    home = fresh(base)
    _make(home / name, state)
    rc = judge(base, *FILES[name], allowed={0, 2, 3})
    if state in ("directory", "fifo", "device", "huge"):
        assert rc == 2  # what the file is: usage
    if state == "link-loop":
        assert rc == 3  # what the file system says (ELOOP): environment
    judge(base, "pod", "create", "new", "--gpus", "1", "--slug", "vllm/qwen3-8b", "--port", "28142", "--force", allowed={0, 1, 2, 3}, writes=True)


@settings(max_examples=max(4, EXAMPLES // 2), deadline=None, phases=PHASES, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(how=st.sampled_from(["readonly", "full"]), where=st.sampled_from(["home", "state"]),
       argv=st.sampled_from([("pod", "create", "new", "--gpus", "1", "--slug", "vllm/qwen3-8b", "--force"), ("pod", "rm", "chat"),
                             ("node", "add", "n9", "--host", "http://127.0.0.1:9", "--ssh", "root@127.0.0.1"), ("node", "rm", "here"),
                             ("pod", "up", "chat"), ("pod", "list"), ("node", "ls")]))
def test_readonly_or_full_file_systems(base, require_service, how, where, argv):
    assume(not (argv[1] == "up" and where == "home"))  # `pod up` writes only C3_STATE; it would boot
    mount = base / f"mnt-{where}"
    with small_tmpfs(mount, "256k", require=require_service) as folder:
        fresh(base)
        env = {}
        if where == "home":
            for item in (base / "home").iterdir():
                shutil.copy(item, folder / item.name)
            env["C3_HOME"] = str(folder)
        else:
            env["C3_STATE"] = str(folder)
        if how == "readonly":
            remount_readonly(folder)
        else:
            fill(folder)
        before = {k: v for k, v in snapshot(folder).items() if k != ".filler"}
        rc, out, err, cpu, rss = c3(base, *argv, env=env)
        where_ = f"{how} {where}: c3 {' '.join(argv)} → {rc}\n{err[-1500:]}"
        assert "Traceback" not in err and cpu <= CPU_S and rss <= RSS_MB, where_
        reads_only = argv[1] in ("list", "ls")
        # C3_HOME refusing: every write is exit 3 naming the folder; reads still work. C3_STATE
        # refusing: only `pod up` writes there (its boot log) — before launching anything.
        if reads_only:
            assert rc == 0, where_
        elif where == "home" or argv[1] == "up":
            assert rc == 3 and err.startswith("c3: error: ") and str(folder) in err.splitlines()[0], where_
        assert {k: v for k, v in snapshot(folder).items() if k != ".filler"} == before, where_


@pytest.fixture
def open_base():
    """A folder `nobody` can traverse (pytest's own tmp folders are 0700)."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="c3-unreadable-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_unreadable_files_are_exit_3_naming_the_file(open_base, require_service):
    """As root nothing is unreadable, so c3 runs as `nobody` here (setpriv, util-linux), over files mode 000."""
    require_service("root and setpriv", shutil.which("setpriv") is not None and os.geteuid() == 0, "needs root and setpriv (util-linux) to drop privileges")
    base = open_base
    home = fresh(base)
    for folder in (home, base / "state"):
        folder.chmod(0o777)
    for name, argv in FILES.items():
        path = home / name
        path.parent.mkdir(exist_ok=True)
        path.parent.chmod(0o777)
        path.write_text("x: 1\n")
        path.chmod(0)
        env = dict(os.environ, C3_HOME=str(home), C3_STATE=str(base / "state"), C3_RIG=str(base / "rig.yaml"), HOME=str(base))
        done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", C3, *argv], env=env, capture_output=True, text=True, timeout=WALL_S)
        assert done.returncode == 3 and "Traceback" not in done.stderr, (name, done.stderr)
        assert done.stderr.startswith("c3: error: cannot read") and str(path) in done.stderr.splitlines()[0]
        path.chmod(0o600)


def test_the_memory_bound_is_the_childs_own(tmp_path: Path) -> None:
    """Grown past the bound itself, this process must not lend its peak RSS to the c3 it measures
    (CI once failed 26 properties at "RSS 562 MB" for a c3 of ~40 MB: wait4 straight from pytest)."""
    ballast = bytearray(RSS_MB * 1024 * 1024)
    ballast[:: 4096] = b"\1" * len(ballast[:: 4096])
    rc, _, err, _, rss = c3(tmp_path, "node", "ls")
    assert rc == 0, err
    assert 5 < rss < RSS_MB / 2, f"c3 node ls measured at {rss:.0f} MB"
    del ballast
