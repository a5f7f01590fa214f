"""`c3 gateway status`: every running gateway's last status file (backend/gateway/status.py)."""

from __future__ import annotations

from backend.gateway.status import GatewayStatus, ModelStatus, read_gateways

__all__ = ["GatewayStatus", "ModelStatus", "running_gateways"]


def running_gateways() -> list[GatewayStatus]:
    """Every gateway whose serve process still runs, as it last wrote its status (per pod: state,
    queue depth, started by the gateway, last start and how long it took)."""
    return read_gateways()
