"""One adapter per external system: only it imports the SDK (ast scan, so lazy imports inside
functions count too). A second HTTP client or SSH runner creeping back in fails here."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

ADAPTERS = {
    "httpx": {"backend/http_probe.py"},
    "urllib.request": set(),  # every HTTP request goes through backend/http_probe.py
    "asyncssh": {"backend/remote/ssh.py", "backend/remote/ssh_target.py"},
    "docker": {"backend/runtime/docker_adapter.py"},
    "pynvml": {"backend/gpu/nvml.py"},
}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_only_the_adapter_imports_its_sdk():
    wrong = []
    for path in [*ROOT.joinpath("backend").rglob("*.py"), *ROOT.joinpath("c3").rglob("*.py")]:
        rel = path.relative_to(ROOT).as_posix()
        for module in _imports(path):
            for sdk, owners in ADAPTERS.items():
                if (module == sdk or module.startswith(sdk + ".")) and rel not in owners:
                    wrong.append(f"{rel} imports {module} (only {sorted(owners) or 'nobody'} may)")
    assert not wrong, "\n".join(sorted(wrong))
