"""Where c3 keeps its files: `$C3_HOME` for configuration, `$C3_STATE` for state (DESIGN.md)."""

from __future__ import annotations

from pathlib import Path

from backend.settings import current


def config_home() -> Path:
    """`$C3_HOME`, default `~/.config/c3`."""
    home = current().home
    return home.expanduser() if home else Path.home() / ".config" / "c3"


def state_home() -> Path:
    """`$C3_STATE`, default `~/.local/state/c3` (logs, boot logs, stop markers, router pins)."""
    state = current().state
    return state.expanduser() if state else Path.home() / ".local" / "state" / "c3"


def estate_file() -> Path:
    """The default estate file, `$C3_HOME/estate.yml`."""
    return config_home() / "estate.yml"


def nodes_file() -> Path:
    """The node registry, `$C3_HOME/nodes.json` (mode 0600)."""
    return config_home() / "nodes.json"


def profiles_dir() -> Path:
    """Launched recipe/shard profiles, `$C3_HOME/profiles/`."""
    return config_home() / "profiles"


def user_catalog_dir() -> Path:
    """The user's own catalog entries, merged over the built-in ones."""
    return config_home() / "catalog.d"


def user_recipes_dir() -> Path:
    """The user's own recipes, merged over the built-in ones."""
    return config_home() / "recipes.d"
