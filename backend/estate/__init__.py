"""The estate: pods planned in a YAML file, validated by one function, changed atomically under a lock.

Public API (others code against it): `load_estate`, `save_estate`, `validate_estate`,
`check_estate`, `create_pod`, `edit_pod`, `remove_pod`, `default_port`.

The names below are loaded on first use (PEP 562), as in `backend.views`: `c3 pod list` reads the file
(`io`) and should not build the catalog's and the fit's models that the rules (`validate`, `ops`) need
(issue 22).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from backend.estate.io import dump_estate, estate_exists, load_estate, parse_document, read_document, save_estate, valid_pod_name
    from backend.estate.ops import CreateResult, EditResult, PlannedPod, RemoveResult, create_pod, edit_pod, plan_edit, plan_pod, remove_pod
    from backend.estate.ports import default_port, host_port_bound
    from backend.estate.validate import EstateCheck, check_estate, validate_estate
    from backend.models.estate import Estate, Pod, Problem

_WHERE = {
    "dump_estate": "backend.estate.io",
    "estate_exists": "backend.estate.io",
    "load_estate": "backend.estate.io",
    "parse_document": "backend.estate.io",
    "read_document": "backend.estate.io",
    "save_estate": "backend.estate.io",
    "valid_pod_name": "backend.estate.io",
    "CreateResult": "backend.estate.ops",
    "EditResult": "backend.estate.ops",
    "edit_pod": "backend.estate.ops",
    "plan_edit": "backend.estate.ops",
    "PlannedPod": "backend.estate.ops",
    "RemoveResult": "backend.estate.ops",
    "create_pod": "backend.estate.ops",
    "plan_pod": "backend.estate.ops",
    "remove_pod": "backend.estate.ops",
    "default_port": "backend.estate.ports",
    "host_port_bound": "backend.estate.ports",
    "EstateCheck": "backend.estate.validate",
    "check_estate": "backend.estate.validate",
    "validate_estate": "backend.estate.validate",
    "Estate": "backend.models.estate",
    "Pod": "backend.models.estate",
    "Problem": "backend.models.estate",
}

__all__ = [
    "CreateResult",
    "EditResult",
    "PlannedPod",
    "Estate",
    "EstateCheck",
    "Pod",
    "Problem",
    "RemoveResult",
    "check_estate",
    "create_pod",
    "default_port",
    "dump_estate",
    "edit_pod",
    "estate_exists",
    "host_port_bound",
    "load_estate",
    "parse_document",
    "plan_edit",
    "plan_pod",
    "read_document",
    "remove_pod",
    "save_estate",
    "valid_pod_name",
    "validate_estate",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(where), name)
    globals()[name] = value  # once loaded, a plain module attribute
    return value
