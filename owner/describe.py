"""What the provider says of itself, and an owner that must stop until an operator steps in."""

from __future__ import annotations

from collections.abc import Collection

from messages.facts import ProviderAdmin, ProviderDescribed
from messages.scripts import ScriptResult
from owner.calls import Call, Describe
from owner.effects import NOTHING, Effects, Notes, note, write
from owner.settings import OwnerSettings
from providers.describe import merge_description
from state.projection import Projection

#: Outcomes that mean the provider cannot work until an operator steps in.
DISABLING = frozenset({"credentials", "config", "spawn_error"})


def describe(busy: Collection[object]) -> Effects:
    return NOTHING if Describe in busy else Effects(calls=(Call(Describe(), "describe", {}),))


def described(p: Projection, s: OwnerSettings, result: ScriptResult) -> Effects:
    """The description, completed and overridden by the config, written when it changed."""
    if not result.ok:
        return note("warning", f"provider {s.name}: describe failed: {result.reason}", repeats="describe")
    try:
        desc = merge_description(s.config, result.output)  # type: ignore[arg-type]
    except ValueError as exc:
        return note("error", f"provider {s.name}: description unusable: {exc}")
    if desc == p.provider(s.name).description:
        return NOTHING
    return write(Notes("described"), [ProviderDescribed(description=desc)])


def disable(p: Projection, s: OwnerSettings, result: ScriptResult, busy: Collection[object]) -> Effects:
    """Exit 77 or 78, or a script that cannot start: the provider is disabled, and says why."""
    if result.outcome not in DISABLING or p.provider(s.name).status == "disabled" or Notes("disabled") in busy:
        return NOTHING
    return (write(Notes("disabled"), [ProviderAdmin(kind="provider_disabled", reason=result.reason)])
            + note("error", f"provider {s.name}: disabled: {result.reason}"))
