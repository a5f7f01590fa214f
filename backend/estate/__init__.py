"""The estate: pods planned in a YAML file, validated by one function, changed atomically under a lock.

Public API (others code against it): `load_estate`, `save_estate`, `validate_estate`,
`check_estate`, `create_pod`, `remove_pod`, `default_port`.
"""

from __future__ import annotations

from backend.estate.io import dump_estate, estate_exists, load_estate, parse_document, read_document, save_estate, valid_pod_name
from backend.estate.ops import CreateResult, PlannedPod, RemoveResult, create_pod, plan_pod, remove_pod
from backend.estate.ports import default_port, host_port_bound
from backend.estate.validate import EstateCheck, check_estate, validate_estate
from backend.models.estate import Estate, Pod, Problem

__all__ = [
    "CreateResult",
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
    "estate_exists",
    "host_port_bound",
    "load_estate",
    "parse_document",
    "plan_pod",
    "read_document",
    "remove_pod",
    "save_estate",
    "valid_pod_name",
    "validate_estate",
]
