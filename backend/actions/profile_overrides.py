"""Change a profile's recipe overrides (`c3 profile set|unset`); applied at its next restart."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, ProgressSink, problems_of
from backend.actions.registry import register
from backend.errors import C3Error


@register
@dataclass
class SetProfileOverrides(Action):
    """Override recipe parameters (checked by the recipe's own parser and known-abort rules); the
    profile becomes "recipe + local overrides"."""

    key = "profile_set"
    doing = "set overrides of profile {target}"
    name: str
    pairs: tuple[str, ...]
    """`KEY=VALUE` entries, as `--set` takes them."""

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> SetProfileOverrides:
        return cls(target or "", tuple(request))

    @property
    def target(self) -> str | None:
        return self.name

    def overrides(self) -> tuple[Any, dict[str, Any]]:
        """(the profile, its overrides after this write); raises C3Error on a bad entry."""
        from backend.profiles import load_profile
        from backend.recipes import check_overrides, get_recipe, parse_overrides

        profile = load_profile(self.name)
        recipe = get_recipe(profile.recipe)
        new = {**profile.overrides, **parse_overrides(recipe, list(self.pairs))}
        check_overrides(recipe, new)
        return profile, new

    def plan(self) -> Plan:
        try:
            _profile, new = self.overrides()
        except C3Error as error:
            return Plan(f"Set overrides of {self.name}", (f"set overrides of {self.name}: {error.message}",))
        return Plan(f"Set overrides of {self.name}", (f"overrides: {', '.join(f'{k}={v}' for k, v in new.items())}",
                                                      f"applied at the next `c3 profile restart {self.name}`"))

    def problems(self) -> list[Problem]:
        return problems_of(self.overrides)

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.profiles import save_profile

        profile, new = self.overrides()
        save_profile(profile.model_copy(update={"overrides": new}))
        shown = ", ".join(f"{k}={v}" for k, v in new.items())
        return Outcome(True, f"{self.name}: recipe + local overrides ({shown}); `c3 profile restart {self.name}` applies them", data=new)


@register
@dataclass
class UnsetProfileOverrides(Action):
    """Drop overrides from a profile (keys it does not have are ignored)."""

    key = "profile_unset"
    doing = "unset overrides of profile {target}"
    name: str
    keys: tuple[str, ...]

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> UnsetProfileOverrides:
        return cls(target or "", tuple(request))

    @property
    def target(self) -> str | None:
        return self.name

    def _after(self) -> tuple[Any, dict[str, Any]]:
        from backend.profiles import load_profile

        profile = load_profile(self.name)
        return profile, {k: v for k, v in profile.overrides.items() if k not in self.keys}

    def plan(self) -> Plan:
        try:
            _profile, new = self._after()
        except C3Error as error:
            return Plan(f"Unset overrides of {self.name}", (f"unset overrides of {self.name}: {error.message}",))
        return Plan(f"Unset overrides of {self.name}", (f"overrides then: {new or 'none'}",))

    def problems(self) -> list[Problem]:
        return problems_of(self._after)

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.profiles import save_profile

        profile, new = self._after()
        save_profile(profile.model_copy(update={"overrides": new}))
        return Outcome(True, f"{self.name}: overrides now {new or 'none'}", data=new)
