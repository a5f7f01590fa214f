"""Fixtures shared by the on-demand and sleep-mode estate tests: no host port is taken, the fit is the fake one,
and the 4-GPU simulated rig is in use. A module imports both names; `_quiet_host` then applies to its every test."""

from __future__ import annotations

from pathlib import Path

import pytest

import backend.estate.validate as validate_module
from tests.estate.cli import RIG_4
from tests.estate.fakes import fake_fit


@pytest.fixture(autouse=True)
def _quiet_host(monkeypatch):
    monkeypatch.setattr("backend.estate.ports.host_port_bound", lambda port: False)
    monkeypatch.setattr(validate_module, "default_fit", lambda: fake_fit)


@pytest.fixture
def rig(tmp_path: Path, monkeypatch) -> Path:
    from tests.support import use_rig

    return use_rig(tmp_path, monkeypatch, RIG_4)
