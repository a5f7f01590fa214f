"""`--require-services`: turn "service missing, skipped" into a failure (CI sets it)."""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--require-services",
        action="store_true",
        default=False,
        help="fail (instead of skip) any test whose external service (dockerd, sshd, netns, fake NVML) is missing",
    )


def services_required(config: pytest.Config) -> bool:
    """True when a missing service must fail the test run."""
    return bool(config.getoption("--require-services")) or os.environ.get("C3_REQUIRE_SERVICES") == "1"


@pytest.fixture(scope="session")
def require_service(pytestconfig: pytest.Config):
    """`require_service(name, ok, why)`: skip when the service is missing, or fail under --require-services."""

    def need(name: str, ok: bool, why: str = "") -> None:
        if ok:
            return
        message = f"service missing: {name}" + (f" ({why})" if why else "")
        if services_required(pytestconfig):
            pytest.fail(message + " — required by --require-services", pytrace=False)
        pytest.skip(message)

    return need
