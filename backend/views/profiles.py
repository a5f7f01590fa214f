"""`c3 profile ls|status|env --json` and the Recipes mode's active profile."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict


class RankStatus(BaseModel):
    """One rank's container on its node."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    node: str
    """The node it runs on."""
    rank: int
    """0 is the head (it serves the endpoint)."""
    state: str
    """The container's state (`running`, `exited`, `absent`, or `error: …` when the node did not answer)."""
    started_at: str | None
    """When the container started (docker's own stamp), if it exists."""


class ProfileStatus(BaseModel):
    """A recipe profile: what it runs, where, and whether its endpoint serves."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    name: str
    """Profile name."""
    recipe: str
    """The recipe it was launched from."""
    status: str
    """`verified recipe`, or `recipe + local overrides` (no verified numbers then)."""
    base_url: str
    """Rank 0's OpenAI base URL."""
    model: str
    """The served model name."""
    overrides: dict[str, Any]
    """`--set` values it was launched with."""
    stopped: bool
    """Deliberately stopped (the watchdog leaves it)."""
    serving: bool
    """Rank 0's endpoint answered."""
    endpoint: str
    """What the endpoint said, or why it did not answer."""
    nodes: list[RankStatus]
    """Each rank's container, rank order."""


class ProfileSummary(BaseModel):
    """One row of `c3 profile ls --json`."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    name: str
    """Profile name."""
    recipe: str
    """The recipe it was launched from."""
    nodes: list[str]
    """Registered nodes in rank order (rank 0 serves)."""
    base_url: str
    """Rank 0's OpenAI base URL."""
    model: str
    """The served model name."""
    overrides: dict[str, Any]
    """`--set` values it was launched with."""
    status: str
    """`verified recipe`, `recipe (unverified)`, `recipe + local overrides` or `recipe missing`."""
    active: bool
    """It is the active profile."""
    stopped: bool
    """Deliberately stopped (the watchdog leaves it)."""


class ProfileList(BaseModel):
    """`c3 profile ls --json`: every launched profile, and which one is active."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    active: str | None
    """The active profile's name (None when none is)."""
    profiles: list[ProfileSummary]
    """Every profile, by name."""


class ProfileEnv(BaseModel):
    """What an OpenAI client needs to reach a profile (`c3 profile env`); never the key itself."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    name: str
    """Profile name."""
    base_url: str
    """Rank 0's OpenAI base URL."""
    model: str
    """The served model name."""
    api_key_env: str | None
    """The name of the variable holding the API key (checked to be a plain variable name)."""


def _label(profile: Any) -> str:
    """The profile's status label against its recipe as it is now (`recipe missing` when it is gone)."""
    from backend.errors import C3Error
    from backend.recipes import get_recipe

    try:
        recipe = get_recipe(profile.recipe)
    except C3Error:
        return "recipe missing"
    return str(profile.status_label(recipe.verified, recipe.digest()))


def _summary(profile: Any, active: str | None) -> ProfileSummary:
    from backend.profiles import is_stopped

    return ProfileSummary(name=profile.name, recipe=profile.recipe, nodes=list(profile.nodes), base_url=profile.base_url, model=profile.model,
                          overrides=dict(profile.overrides), status=_label(profile), active=profile.name == active, stopped=is_stopped(profile.name))


def profile_list() -> ProfileList:
    """Every profile with its label, and the active one."""
    from backend.profiles import active_name, list_profiles

    active = active_name()
    return ProfileList(active=active, profiles=[_summary(p, active) for p in list_profiles()])


def active_profile() -> ProfileSummary | None:
    """The active profile (None when none is active or its file cannot be read)."""
    from backend.errors import C3Error
    from backend.profiles import active_name, load_profile

    name = active_name()
    if not name:
        return None
    try:
        return _summary(load_profile(name), name)
    except C3Error:
        return None


def profile_status(name: str | None) -> ProfileStatus:
    """The profile (None: the active one) with each rank's container and whether rank 0 serves,
    asked on its nodes now."""
    from backend.cluster.control import status
    from backend.profiles import is_stopped, resolve
    from backend.remote.fleet import run_sync

    p = resolve(name)
    st = run_sync(status(p))
    return ProfileStatus(name=p.name, recipe=p.recipe, status=_label(p), base_url=p.base_url, model=p.model, overrides=p.overrides,
                         stopped=is_stopped(p.name), serving=st.endpoint_ok, endpoint=st.endpoint_detail,
                         nodes=[RankStatus(node=n.node, rank=n.rank, state=n.state, started_at=n.started_at) for n in st.nodes])


def profile_env(name: str | None) -> ProfileEnv:
    """Base URL, model and the API key's variable name of a profile (None: the active one).
    UsageError when the variable name edited into the profile file is not a plain name (users eval
    `c3 profile env`: it must not run anything)."""
    from backend.envnames import check_env_name
    from backend.profiles import resolve

    p = resolve(name)
    if p.api_key_env:
        check_env_name(p.api_key_env, f"profile {p.name} api_key_env")
    return ProfileEnv(name=p.name, base_url=p.base_url, model=p.model, api_key_env=p.api_key_env)


def profile_log(name: str | None, on_line: Callable[[str], object], *, node: str | None = None, tail: int = 100, follow: bool = False) -> None:
    """Pass a rank's container log (rank 0 unless `node`) to `on_line`, line by line; with `follow`,
    until the container ends or the caller is interrupted."""
    from backend.cluster.control import logs
    from backend.profiles import resolve
    from backend.remote.fleet import run_sync

    p = resolve(name)

    async def go() -> None:
        async for line in logs(p, node=node, tail=tail, follow=follow):
            on_line(line)

    run_sync(go())
