"""Running the suite on several pytest-xdist workers: `pytest -n 2 --dist loadgroup`.

Workers are separate processes on one machine, so what they must not do at once is decided by the
machine-wide things a test uses. Every test that uses one of them gets `xdist_group(NAME)` at
collection (first rule that matches wins, so each test is in exactly one group); `--dist loadgroup`
runs a group on one worker, in order, while the ungrouped tests spread over all workers one by one.
A new test joins its group by the fixture or marker it uses, with nothing to remember.

- `netns`: a test-host fixture (`host_rig_factory`, so `ssh_hosts`, `docker_hosts`…) or marker `netns`.
  One rig per worker would be built (each with sshds and dockerds); `ray stop` and `shard stop` on a test
  host reach every session's Ray (the hosts share one pid namespace); the Ray venv under .rig/ is filled
  without a lock.
- `docker`: `docker_client` (so `stub_image`, `stub_container`, `real_images`) or marker `docker`. c3
  lists every `io.c3.pod` container on the daemon (pod status, the GPU gate, the tests' "no pod container
  left" checks), and the tests' pods have fixed names (container `c3-<pod>`).
- no group for the real engines themselves: the real-engine tier runs on at most two workers (scripts/test.py),
  and every engine the rig starts computes on one thread (`OMP_NUM_THREADS=1`, llama-server `-t 1`), so two at
  once share a 2-core box; a module that keeps an engine for its tests (a module-scoped fixture) is one group by
  the file rule below, so its engine is started once. (Until 2026-12-07 they were one `engines` group: in a run of
  the tier on two workers that group held one worker 865 s while the other finished in 306.)
- `world`: `demo_world`, `worlds` or `shared_world` (tests/cockpit/world.py, shared.py). A world's pods and router
  bind the fixed ports its pictures show (8020, 8024, 8900, 8011), under a machine-wide lock: a world test on a
  second worker would only wait for that lock (a whole CI run saw a shared-world test's setup wait 151 s for it).
- the test's file: any module-, class- or package-scoped fixture. Under loadgroup an ungrouped module's
  tests spread over every worker, each building the module's fixture again (the CLI sweep's runs every
  case of the module, whichever tests the worker got).

`netns` comes before `docker`: the cluster tests use the machine's dockerd only to build and ship the
stub image (under the rig's build lock), and their containers run on the test hosts' own daemons.

Safe on any worker without a group (checked): the fake NVML library (built once per source hash and
renamed into place atomically; each test gets its own state file), the stub image build (rig lock,
checked again under it), tmux (a private server per pid), stub engines and routers (free ports),
the real-engine build (a file lock per artefact under /var/cache/c3-rig; started on one worker only,
see tests/plugins/real_engine.py), and everything under C3_HOME/C3_STATE/tmp_path (per test).

Terminal-summary lines of the plugins (`summary_line`) are written by the worker that has them; under
xdist the controller prints them, since a worker's terminal is not shown.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

_SUMMARY: list[str] = []
_WORKER_SUMMARY_KEY = "c3_summary_lines"

GROUP_RULES: list[tuple[str, frozenset[str], frozenset[str]]] = [
    # (group, fixtures, markers): the first rule a test matches names its group.
    ("netns", frozenset({"host_rig_factory"}), frozenset({"netns"})),
    ("docker", frozenset({"docker_client"}), frozenset({"docker"})),
    ("world", frozenset({"demo_world", "worlds", "shared_world"}), frozenset()),
]
SHARED_SCOPES = ("module", "class", "package")


def worker_id(config: pytest.Config) -> str | None:
    """`gw0`, `gw1`, … in an xdist worker; None in a run without xdist (or in the controller)."""
    workerinput = getattr(config, "workerinput", None)
    return workerinput["workerid"] if workerinput is not None else None


def summary_line(config: pytest.Config, line: str) -> None:
    """A line for the terminal summary, from whichever process has it (a worker forwards it)."""
    output = getattr(config, "workeroutput", None)
    if output is not None:
        output.setdefault(_WORKER_SUMMARY_KEY, []).append(f"[{worker_id(config)}] {line}")
    else:
        _SUMMARY.append(line)


def group_of(item: pytest.Item) -> str | None:
    """The xdist group a test belongs to (see the module's table), or None."""
    fixtures = set(getattr(item, "fixturenames", ()))
    markers = {mark.name for mark in item.iter_markers()}
    for group, by_fixture, by_marker in GROUP_RULES:
        if fixtures & by_fixture or markers & by_marker:
            return group
    if _uses_shared_fixture(item):
        return item.nodeid.split("::", 1)[0]
    return None


def _uses_shared_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs and defs[-1].scope in SHARED_SCOPES for defs in info.name2fixturedefs.values())


@pytest.hookimpl(tryfirst=True)  # before xdist turns the marks into the node ids' `@group` suffix
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue  # a test that names its own group keeps it (two marks would make a third group)
        group = group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "xdist_group(name): run on one pytest-xdist worker with the group's other tests")
    if config.pluginmanager.hasplugin("xdist") and worker_id(config) is None:
        config.pluginmanager.register(_Controller(_SUMMARY.extend), "c3-xdist-controller")


class _Controller:
    """Collects the summary lines each worker sends back when it finishes (xdist's own hook)."""

    def __init__(self, add: Callable[[list[str]], None]) -> None:
        self.add = add

    def pytest_testnodedown(self, node, error) -> None:
        self.add(list(getattr(node, "workeroutput", {}).get(_WORKER_SUMMARY_KEY, [])))


def pytest_terminal_summary(terminalreporter) -> None:
    for line in _SUMMARY:
        terminalreporter.write_line(line)
