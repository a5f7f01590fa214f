"""Root test configuration.

Integration tests need real services (dockerd, sshd, network namespaces, the fake NVML library).
Without them a test is skipped — unless `--require-services` (or C3_REQUIRE_SERVICES=1) is given,
as CI does, in which case a missing service is a failure, never a skip.
"""

from __future__ import annotations

import pytest

# `workers` first: the plugins after it import its helpers, and a module imported before pytest loads it
# as a plugin is not assertion-rewritten.
pytest_plugins = [
    "tests.plugins.workers",
    "tests.plugins.netguard",
    "tests.plugins.services",
    "tests.plugins.rig",
    "tests.plugins.hosts",
    "tests.plugins.real_engine",
]


@pytest.fixture(autouse=True)
def _isolated_c3_dirs(tmp_path_factory, monkeypatch):
    """Every test gets its own C3_HOME and C3_STATE: no test reads or writes the user's files."""
    base = tmp_path_factory.mktemp("c3")
    monkeypatch.setenv("C3_HOME", str(base / "home"))
    monkeypatch.setenv("C3_STATE", str(base / "state"))
    monkeypatch.delenv("C3_RIG", raising=False)
    monkeypatch.delenv("C3_GPU_MODE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    yield base
    # Settings a test installed (`c3 demo`'s) must not reach the next test.
    from backend.settings import reset

    reset()
