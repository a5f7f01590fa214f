"""Launched profiles: `$C3_HOME/profiles/NAME.yaml`, the `active` marker beside them, and the
deliberate-stop markers under `$C3_STATE/stopped/` that keep the watchdog away.

A recipe profile records what was launched (recipe id and content digest, nodes in rank order, local
overrides, endpoint) so `c3 profile …` can act on it later. It never holds a secret: only the *name*
of the variable that holds the API key.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from backend import paths, strict_yaml
from backend.atomic import locked, write_atomic
from backend.errors import C3Error, Refused, UsageError
from backend.text import show
from backend.userfiles import read_text

PROFILE_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]*(?:\.[a-z0-9_-]+)*$"
"""Lower-case letters, digits, `_`, `-` and single dots between them: never a path separator or `..`,
since the name becomes a file name (profiles/NAME.yaml, the nodes' env files, stop markers)."""
PROFILE_NAME_MAX = 60
ParamValue = str | int | float | bool


class Profile(BaseModel):
    """One launched (or launchable) recipe profile."""

    # Other features (shard) may keep their own keys in the same file: keep them on rewrite.
    model_config = ConfigDict(extra="allow")

    name: str = Field(pattern=PROFILE_NAME_PATTERN, max_length=PROFILE_NAME_MAX)
    """Profile name (the recipe id unless chosen otherwise)."""
    kind: str = "recipe"
    """What launched it; this module handles `recipe`."""
    recipe: str
    """Recipe id."""
    recipe_digest: str
    """Content digest of the recipe when launched; a different digest now means the recipe changed."""
    nodes: list[str]
    """Registered node names in rank order (rank 0, the first, serves the API)."""
    overrides: dict[str, ParamValue] = Field(default_factory=dict)
    """Local overrides of the recipe's parameters (`--set`, `c3 profile set`)."""
    base_url: str
    """OpenAI base URL of rank 0, e.g. `http://10.0.0.5:8000/v1`."""
    model: str
    """Model name clients send."""
    api_key_env: str | None = None
    """Name of the variable holding the API key (never the key)."""
    launched_at: str | None = None
    """UTC time of the last launch (ISO 8601)."""
    force: bool = False
    """Launched with `--force` past a hardware mismatch: a restart, switch or watchdog relaunch keeps it."""

    def status_label(self, recipe_verified: bool, current_digest: str | None) -> str:
        """`verified recipe`, `recipe (unverified)` or `recipe + local overrides`."""
        if self.overrides or (current_digest is not None and current_digest != self.recipe_digest):
            return "recipe + local overrides"
        return "verified recipe" if recipe_verified else "recipe (unverified)"


def check_name(name: str) -> str:
    """`name` when it is a valid profile name; else a UsageError (exit 2) that says what is allowed."""
    if not isinstance(name, str) or len(name) > PROFILE_NAME_MAX or not re.fullmatch(PROFILE_NAME_PATTERN, name):
        raise UsageError(f"profile name `{show(name, 80)}` is not valid",
                         hint=f"use lower-case letters, digits, `-`, `_` and single dots, starting with a letter or digit, at most {PROFILE_NAME_MAX} characters")
    return name


def profile_path(name: str) -> Path:
    return paths.profiles_dir() / f"{check_name(name)}.yaml"


def active_file() -> Path:
    return paths.profiles_dir() / "active"


def load_profile(name: str) -> Profile:
    path = profile_path(name)
    if not path.exists():
        raise Refused(f"no profile `{name}`", hint="`c3 profile ls` lists profiles; `c3 recipes launch ID --nodes a,b` makes one")
    data = strict_yaml.load(read_text(path, what="profile"), source=str(path), what="profile", hint="fix or remove the file")
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "profile"
        raise UsageError(f"profile {path} is not valid: {show(where, 60)}: {show(first['msg'], 120)}", hint="fix or remove the file") from None


def save_profile(profile: Profile) -> Path:
    path = profile_path(profile.name)
    with locked(path):
        write_atomic(path, yaml.safe_dump(profile.model_dump(mode="json"), sort_keys=False), mode=0o600)
    return path


def list_profiles() -> list[Profile]:
    folder = paths.profiles_dir()
    found = []
    for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
        try:
            data = strict_yaml.load(read_text(path, what="profile"), source=str(path), what="profile")
            if isinstance(data, dict) and data.get("kind", "recipe") == "recipe" and "recipe" in data:
                found.append(Profile.model_validate(data))
        except (C3Error, ValidationError):
            continue  # not ours (a shard profile) or broken: `profile status NAME` reports it
    return found


def active_name() -> str | None:
    path = active_file()
    try:
        name = (read_text(path, what="active-profile marker", limit=4096, missing_ok=True) or "").strip()
    except C3Error:
        return None
    return name or None


def set_active(name: str) -> None:
    write_atomic(active_file(), check_name(name) + "\n", mode=0o600)


def resolve(name: str | None) -> Profile:
    """The named profile, or the active one."""
    if name:
        return load_profile(name)
    current = active_name()
    if not current:
        raise Refused("no active profile", hint="launch one with `c3 recipes launch ID --nodes a,b`, or name it")
    return load_profile(current)


def now_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


# --- deliberate stops ---------------------------------------------------------------------------


def stop_marker(name: str) -> Path:
    """`$C3_STATE/stopped/NAME`: present while the user wants the profile stopped."""
    return paths.state_home() / "stopped" / check_name(name)


def mark_stopped(name: str, why: str) -> None:
    write_atomic(stop_marker(name), f"{now_iso()} {why}\n", mode=0o600)


def clear_stopped(name: str) -> None:
    stop_marker(name).unlink(missing_ok=True)


def is_stopped(name: str) -> bool:
    return stop_marker(name).exists()
