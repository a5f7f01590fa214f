#!/usr/bin/env python3
"""Run c3's test suite: `python3 scripts/test.py [--require-services] [--phases] [pytest args…]`.

Creates `.venv` beside the project on first use and installs c3 with its test extras into it
(again only when pyproject.toml changes), then runs pytest there. Integration tests use whatever
services this machine provides (dockerd, sshd, network namespaces) and skip the rest;
`--require-services` (what CI passes) turns every such skip into a failure.

With no selection (no test path, `-m`, `-k`, `--lf`…), the whole suite runs in phases, so that the
real engines' cold build (scripts/rig/real_engines.py: llama.cpp's compile, the vLLM venv, the tiny
models; about 20 minutes on a 2-core machine) overlaps the tests that do not need it:

1. the engine build starts in the background, niced (BUILD_NICE), logging to .rig/test-run/;
2. the static checks (tests marked `static`: mypy, ruff, import contracts);
3. the tests that need no engine, on pytest-xdist workers (one per core plus one, at most 4; `C3_TEST_WORKERS`
   sets the number, 1 runs them in one process; a `-n` of the caller's wins);
4. the `real_engine` tier, once the build is done. A failed build fails the run under
   `--require-services` (its log's tail is printed) and skips the tier otherwise.

Every phase gets the other arguments (`-q`, `-x`, `-p no:cacheprovider`…). A phase that selects no test
(pytest's exit 5) is no failure; any other non-zero exit fails the run. The run ends with a timing
breakdown (also written to .rig/test-run/timings.txt) and one pytest summary line over all phases.
`--phases` runs a selection in phases too. With a selection, one plain pytest run takes exactly the
arguments given (a selected `real_engine` test builds the engines first, in the foreground).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import venv
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
RUN_DIR = ROOT / ".rig" / "test-run"
"""This run's engine-build log and timings, the phases' counts, timings.txt (.rig/ is gitignored)."""


@dataclass(frozen=True)
class Phase:
    name: str
    marker: str
    """The `-m` expression selecting its tests; the three phases together select every test once."""
    engines: bool = False
    """Waits for the background engine build first."""
    args: tuple[str, ...] = ()
    """Extra pytest arguments for this phase."""
    xdist_args: tuple[str, ...] = ()
    """Extra pytest arguments when pytest-xdist is installed in .venv (e.g. `-n 2 --dist loadgroup`)."""


def workers() -> int:
    """pytest-xdist workers for the tests needing no engine: one per core plus one, at most 4
    (`C3_TEST_WORKERS` overrides; 0 or 1 runs them in one process). Most of those tests wait on child
    processes, sockets and subprocess start-up rather than compute; tests that share a machine-wide thing
    run in one xdist group each (tests/plugins/workers.py). Measured on the 2-core CI kind (2026-12-07,
    warm, bench/RESULTS.md): with 2 workers the machine was 29 % idle over the phase (18:19); with 3 it
    took 15:50, the cockpit's `world` group (one worker, ~15 % of the machine busy while it alone runs)
    being the last to finish."""
    chosen = os.environ.get("C3_TEST_WORKERS", "")
    if chosen.isdigit():
        return int(chosen)
    cores = os.cpu_count() or 1
    return min(cores + 1, 4) if cores > 1 else 1


def tier_workers(workers: int) -> int:
    """Workers for the real-engine tier: as many as for the other tests, at most two (see PHASES)."""
    return min(workers, 2)


def _xdist(n: int) -> tuple[str, ...]:
    return ("-n", str(n), "--dist", "loadgroup") if n > 1 else ()


# Where a whole run's time goes, printed by each long phase (issue 22: every cut starts from these).
SLOWEST = ("--durations=25",)

# The one place the phases' pytest arguments are set. The real-engine tier runs on at most two workers, one
# xdist group each at a time (tests/plugins/workers.py): the test-host tests (netns), the Docker pods (docker) and
# the engines started as local processes (engines). Every engine the rig starts runs one compute thread
# (`OMP_NUM_THREADS=1`, llama-server `-t 1`), so two at once share a 2-core box without starving each other;
# a vLLM boot is mostly one interpreter importing torch, which a second core does not speed up.
PHASES = (
    Phase("static checks", "static and not real_engine"),
    Phase("tests needing no engine", "not static and not real_engine", args=SLOWEST, xdist_args=_xdist(workers())),
    Phase("real_engine tier", "real_engine", args=SLOWEST, xdist_args=_xdist(tier_workers(workers())), engines=True),
)

# The build gets the CPU the tests leave: the tests have timing-sensitive parts and must not starve, while
# the build, which they do not wait for, takes up every idle moment, so no CPU time is lost, only reordered.
# Measured (2026-12-02, a CPU-bound loop sharing one core with a busy loop, the machine's load ~10): 1.06 s
# alone, 2.64 s beside nice 0, 1.50 s beside nice 10, 1.18 s beside nice 19.
BUILD_NICE = 19

# Arguments that select tests (so: one plain pytest run), and options whose value is the next argument.
SELECTING = {"--lf", "--last-failed", "--sw", "--stepwise", "--sw-skip", "--co", "--collect-only", "--collectonly",
             "--deselect", "-h", "--help", "--version", "-V", "--fixtures", "--markers"}
VALUED = {"-p", "-c", "-o", "-W", "-n", "-r", "--dist", "--durations", "--durations-min", "--timeout", "--maxfail",
          "--basetemp", "--rootdir", "--junitxml", "--junit-xml", "--confcutdir", "--tb", "--deselect", "--ignore",
          "--ignore-glob", "--log-level", "--override-ini", "--maxprocesses", "--color", "--import-mode", "--capture"}


def ensure_venv() -> Path:
    python = VENV / "bin" / "python"
    if not python.exists():
        print("test: creating .venv", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    stamp = VENV / ".c3-test-install"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if not stamp.exists() or stamp.read_text().strip() != digest:
        print("test: installing c3 with its test extras into .venv", flush=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-e", f"{ROOT}[test]"], check=True)
        stamp.write_text(digest)
    install_netguard()
    return python


def install_netguard() -> None:
    """Child Python processes of a test run load the network guard (tests/plugins/netguard_socket.py) at start-up,
    when the session's `C3_TEST_NETGUARD` is in their environment: a `.pth` in this venv, never outside it."""
    site = VENV / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    guard = ROOT / "tests" / "plugins" / "netguard_socket.py"
    line = (f"import os; os.environ.get('C3_TEST_NETGUARD') and __import__('runpy').run_path({str(guard)!r}, "
            "run_name='c3_test_netguard_pth')\n")
    pth = site / "c3_test_netguard.pth"
    if site.is_dir() and (not pth.exists() or pth.read_text() != line):
        pth.write_text(line)


def selects(args: list[str]) -> bool:
    """Do these pytest arguments choose tests (a path or node id, `-m`, `-k`, `--lf`…)?"""
    skip_next = False
    for arg in args:
        if skip_next:
            skip_next = False
        elif arg in SELECTING or arg.startswith("--deselect="):
            return True
        elif arg.startswith(("-m", "-k")):
            return True
        elif arg in VALUED:
            skip_next = True
        elif not arg.startswith("-") and ((ROOT / arg.split("::")[0]).exists() or Path(arg.split("::")[0]).exists()):
            return True
    return False


def fmt(seconds: float) -> str:
    return f"{seconds:7.0f}s  {int(seconds) // 60:3d}:{int(seconds) % 60:02d}"


def counts_text(counts: dict[str, int]) -> str:
    """pytest's wording and order: `2 failed, 1577 passed, 3 skipped, 1 warning, 1 error`."""
    order = ["failed", "passed", "skipped", "xfailed", "xpassed", "warnings", "error"]
    keys = [k for k in order if counts.get(k)] + sorted(k for k in counts if k not in order and k != "deselected" and counts[k])
    words = []
    for key in keys:
        noun = key.replace("warnings", "warning")
        if noun in ("error", "warning") and counts[key] != 1:
            noun += "s"
        words.append(f"{counts[key]} {noun}")
    return ", ".join(words) or "no tests ran"


class EngineBuild:
    """`real_engines.py build all` in its own process group, niced, output in RUN_DIR/engine-build.log."""

    def __init__(self) -> None:
        self.log = RUN_DIR / "engine-build.log"
        self.timings = RUN_DIR / "engine-build.json"
        self.started = time.monotonic()
        self.ended: float | None = None
        self.stopped = False
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-u", str(ROOT / "scripts" / "rig" / "real_engines.py"), "build", "all", "--timings", str(self.timings)],
                cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=lambda: os.nice(BUILD_NICE))
        threading.Thread(target=self._watch, daemon=True).start()
        print(f"test: building the real engines in the background (nice {BUILD_NICE}; log {self.log.relative_to(ROOT)})",
              flush=True)

    def _watch(self) -> None:
        self.proc.wait()
        self.ended = time.monotonic()  # the build's own wall time, not when someone looked

    def wait(self) -> str | None:
        """Block until the build ends; None when it succeeded, else what failed with the log's tail."""
        self.proc.wait()
        if self.proc.returncode == 0:
            return None
        tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])
        return f"the real-engine build failed (exit {self.proc.returncode}); log {self.log}; its end:\n{tail}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.stopped = True
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait()

    def steps(self) -> list[tuple[str, float]]:
        try:
            return sorted(json.loads(self.timings.read_text())["steps"].items())
        except (OSError, ValueError, KeyError):
            return []


@dataclass
class Report:
    """The breakdown's rows (label, seconds, note) and the outcome counts summed over the phases."""

    rows: list[tuple[str, float, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, label: str, seconds: float, note: str = "") -> None:
        self.rows.append((label, seconds, note))

    def count(self, counts: dict[str, int]) -> None:
        for key, n in counts.items():
            self.counts[key] = self.counts.get(key, 0) + n

    def lines(self, started: float, build: EngineBuild) -> list[str]:
        rows: list[tuple[str, float, str]] = []
        ci_steps = os.environ.get("C3_CI_STEPS")  # .ci/run's own steps: `label<TAB>seconds` lines
        if ci_steps and Path(ci_steps).exists():
            for line in Path(ci_steps).read_text().splitlines():
                label, _, seconds = line.partition("\t")
                if seconds:
                    rows.append((label, float(seconds), "(.ci/run)"))
        code = build.proc.poll()
        state = "stopped" if build.stopped else "ok" if code == 0 else "running" if code is None else f"failed (exit {code})"
        rows.append((f"engine build, background, nice {BUILD_NICE} (wall)", (build.ended or time.monotonic()) - build.started, state))
        rows += [(f"  {step}", seconds, "") for step, seconds in build.steps()]
        rows += self.rows
        rows.append(("test command total", time.monotonic() - started, ""))
        if os.environ.get("C3_CI_STARTED"):
            rows.append(("CI total (.ci/run)", time.time() - float(os.environ["C3_CI_STARTED"]), ""))
        return ["test: timing breakdown (seconds, m:ss)"] + [f"  {label:44} {fmt(seconds)}  {note}".rstrip()
                                                            for label, seconds, note in rows]


def run_phases(args: list[str], require: bool) -> int:
    started = time.monotonic()
    shutil.rmtree(RUN_DIR, ignore_errors=True)
    RUN_DIR.mkdir(parents=True)
    report = Report()
    build = EngineBuild()  # before .venv: the build needs only this python, so it overlaps the install too
    try:
        t0 = time.monotonic()
        python = ensure_venv()
        report.add(".venv install", time.monotonic() - t0)
        rc = run_each_phase(python, args, require, build, report)
    except KeyboardInterrupt:
        build.stop()
        print("test: interrupted", file=sys.stderr)
        return 2
    build.stop()  # still running only when the run stopped early (-x) or no engine test was selected
    lines = report.lines(started, build)
    total = time.monotonic() - started
    summary = f" {counts_text(report.counts)} in {total:.2f}s ({int(total) // 3600}:{int(total) % 3600 // 60:02d}:{int(total) % 60:02d}) "
    (RUN_DIR / "timings.txt").write_text("\n".join([*lines, summary.strip()]) + "\n")
    print("\n".join(lines))
    print(f"test: breakdown kept in {(RUN_DIR / 'timings.txt').relative_to(ROOT)}")
    print(summary.center(80, "="), flush=True)  # the last line: one pytest summary line over every phase
    return rc


def pytest_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("TEXTUAL_ANIMATIONS", "none")
    return env


def selects_none(python: Path, args: list[str], marker: str, env: dict[str, str]) -> bool:
    """Does this selection hold no test of `marker` (pytest's exit 5 when collecting)?"""
    return subprocess.run([str(python), "-m", "pytest", "--co", "-q", *args, "-m", marker], cwd=ROOT, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 5


def run_each_phase(python: Path, args: list[str], require: bool, build: EngineBuild, report: Report) -> int:
    env = pytest_env()
    xdist = subprocess.run([str(python), "-c", "import xdist"], capture_output=True).returncode == 0
    codes = []
    for number, phase in enumerate(PHASES, 1):
        build_failed = False
        if phase.engines:
            if selects(args) and selects_none(python, args, phase.marker, env):
                build.stop()  # a selection run in phases without any engine test: no need to wait for the build
            else:
                t0 = time.monotonic()
                if build.proc.poll() is None:
                    print("test: waiting for the real-engine build…", flush=True)
                problem = build.wait()
                report.add("waiting for the engine build", time.monotonic() - t0)
                if problem is not None:
                    build_failed = True
                    print(f"test: {problem}", flush=True)
                    env["C3_REAL_ENGINE_PROBLEM"] = f"the background build failed (exit {build.proc.returncode}); log {build.log}"
        chose_workers = any(arg.startswith(("-n", "--numprocesses")) for arg in args)  # the caller's own -n wins
        extra = [*phase.args, *(phase.xdist_args if xdist and not chose_workers else ())]
        report_file = RUN_DIR / f"phase-{number}.json"
        print(f"test: phase {number}/{len(PHASES)}: {phase.name} (-m '{phase.marker}')", flush=True)
        t0 = time.monotonic()
        rc = subprocess.run([str(python), "-m", "pytest", *args, *extra, "-m", phase.marker, "-p", "scripts.phase_report"],
                            cwd=ROOT, env={**env, "C3_PHASE_REPORT": str(report_file)}).returncode
        seconds = time.monotonic() - t0
        try:
            counts = json.loads(report_file.read_text())["counts"]
        except (OSError, ValueError, KeyError):
            counts = {}
        said = counts.get("failed") or counts.get("error")
        if rc not in (0, 5) and not said:
            counts["error"] = counts.get("error", 0) + 1  # pytest itself failed (usage, internal error): one error
        elif build_failed and require and not said:
            counts["error"] = counts.get("error", 0) + 1  # the build failed and no selected test said so
            rc = 1
        report.count(counts)
        report.add(phase.name, seconds, counts_text(counts) + ("" if rc in (0, 5) else f" (pytest exit {rc})"))
        codes.append(rc)
        if rc not in (0, 5) and ("-x" in args or "--exitfirst" in args):
            break
    failed = [rc for rc in codes if rc not in (0, 5)]
    return failed[0] if failed else 5 if all(rc == 5 for rc in codes) else 0


def main() -> int:
    args = sys.argv[1:]
    phases = "--phases" in args
    args = [arg for arg in args if arg != "--phases"]
    require = "--require-services" in args or os.environ.get("C3_REQUIRE_SERVICES") == "1"
    if phases or not selects(args):
        if any(arg.startswith("-m") for arg in args):
            print("test: error: the phases choose their tests with -m themselves\n"
                  "hint: run a marker's tests alone without --phases: python3 scripts/test.py -m real_engine", file=sys.stderr)
            return 2
        return run_phases(args, require)
    python = ensure_venv()
    return subprocess.run([str(python), "-m", "pytest", *args], cwd=ROOT, env=pytest_env()).returncode


if __name__ == "__main__":
    sys.exit(main())
