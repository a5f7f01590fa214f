"""`c3 pod exec` on the simulated rig: its runtime runs engines as local processes, with no container to
enter, so it says so in one line (exit 1); a missing command is a usage error (exit 2)."""

from __future__ import annotations

from tests.runtime.helpers import c3, one_error_line, stub_entry, write_catalog
from tests.runtime.test_sim_lifecycle import create, sim  # noqa: F401 - the fixture


def test_exec_is_not_supported_by_the_simulated_runtime(sim):  # noqa: F811
    write_catalog([stub_entry()])
    create(sim, "chat", "0")
    refused = c3("pod", "exec", "chat", "--", "echo", "hi")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "not supported by the simulated runtime" in one_error_line(refused.stderr)
    nothing = c3("pod", "exec", "chat")
    assert nothing.returncode == 2 and "give the command after --" in one_error_line(nothing.stderr)
