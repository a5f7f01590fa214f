"""Every external library that product code imports is held by an import contract (issue 23): one
`protected` contract in pyproject.toml naming the adapter module(s) allowed to import it, so a second
importer of an SDK fails `lint-imports` (tests/arch/test_layers.py).

This file checks the contracts themselves: one exists for each library below and for any new
third-party import (unless it is a general-purpose library listed in GENERAL), and each contract's
allowed importers really import the library (a stale exemption would let a new importer in silently).
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("backend", "c3", "widgets")

SDKS = ("docker", "asyncssh", "pynvml", "httpx", "httptools", "uvloop", "ruamel", "prometheus_client", "textual", "rich")
"""The external systems and heavy libraries that each have one adapter (DESIGN.md: only adapters import the SDKs)."""

GENERAL = {
    "pydantic": "the models' own language, used everywhere by design",
    "yaml": "PyYAML: libyaml's event stream (strict_yaml) and plain dumps; no external system behind it",
    "click": "the CLI's argument parser; the front-door contract keeps it inside c3/",
}
"""Third-party libraries that need no adapter, each with the reason."""

pytestmark = pytest.mark.static


def protected_contracts() -> dict[str, list[str]]:
    """Library → the allowed importers of the `protected` contract that names it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    held: dict[str, list[str]] = {}
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract["type"] == "protected":
            for module in contract["protected_modules"]:
                assert module not in held, f"{module} is protected by two contracts"
                held[module] = list(contract["allowed_importers"])
    return held


def importers() -> dict[str, set[str]]:
    """Third-party top-level package → the product modules that import it (imports inside functions too)."""
    graph = grimp.build_graph(*PRODUCT, include_external_packages=True, exclude_type_checking_imports=True)
    found: dict[str, set[str]] = {}
    for module in graph.modules:
        top = module.split(".")[0]
        if top in PRODUCT or top in sys.stdlib_module_names or top == "__future__":
            continue
        found[top] = set(graph.find_modules_that_directly_import(module))
    return found


def missing_contracts(held: dict[str, list[str]], used: dict[str, set[str]]) -> list[str]:
    wanted = set(SDKS) | (set(used) - set(GENERAL))
    return sorted(wanted - set(held))


def test_every_sdk_has_its_adapter_contract():
    missing = missing_contracts(protected_contracts(), importers())
    assert missing == [], "no import contract naming the adapter for: " + ", ".join(missing) + " (add a `protected` contract to pyproject.toml)"


def test_the_check_fails_when_a_contract_is_missing():
    held = protected_contracts()
    for library in SDKS:
        without = {name: allowed for name, allowed in held.items() if name != library}
        assert missing_contracts(without, importers()) == [library]
    assert missing_contracts(held, {**importers(), "newsdk": {"backend.x"}}) == ["newsdk"]


def test_every_allowed_importer_imports_its_library():
    used = importers()
    stale = [
        f"{library}: {allowed}"
        for library, allowed_list in protected_contracts().items()
        for allowed in allowed_list
        if not any(m == allowed or m.startswith(allowed + ".") for m in used.get(library, ()))
    ]
    assert stale == [], "contracts allow importers that import nothing of theirs:\n" + "\n".join(stale)
