#!/usr/bin/env python3
"""Run c3's whole test suite: `python3 scripts/test.py [--require-services] [pytest args…]`.

Creates `.venv` beside the project on first use and installs c3 with its test extras into it
(again only when pyproject.toml changes), then runs pytest there. Integration tests use whatever
services this machine provides (dockerd, sshd, network namespaces) and skip the rest;
`--require-services` (what CI passes) turns every such skip into a failure.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"


def ensure_venv() -> Path:
    python = VENV / "bin" / "python"
    if not python.exists():
        print("test: creating .venv", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    stamp = VENV / ".c3-test-install"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if not stamp.exists() or stamp.read_text().strip() != digest:
        print("test: installing c3 with its test extras into .venv", flush=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-e", f"{ROOT}[test]"], check=True)
        stamp.write_text(digest)
    return python


def main() -> int:
    python = ensure_venv()
    args = sys.argv[1:]
    env = dict(os.environ)
    env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("TEXTUAL_ANIMATIONS", "none")
    result = subprocess.run([str(python), "-m", "pytest", *args], cwd=ROOT, env=env)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
