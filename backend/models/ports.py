"""The TCP-port rule for the front ends: the range is kept in `backend.limits` (one place), and c3 reaches
the backend only through actions, views, models and errors (pyproject.toml's import contract), so the
rule is handed on here."""

from __future__ import annotations

from backend.limits import PORT_MAX, PORT_MIN, is_port, port_text

__all__ = ["PORT_MAX", "PORT_MIN", "is_port", "port_text"]
