"""What an owner knows of its provider beyond the facts: its config, the policy, its resources."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from config.models import PolicyConfig, ProviderConfig, ResourceConfig
from messages.facts import new_id
from messages.scripts import Action
from providers.contract import supports


@dataclass(frozen=True)
class OwnerSettings:
    config: ProviderConfig
    policy: PolicyConfig
    #: The elastic resources this provider lends (their totals are its to publish).
    resources: tuple[ResourceConfig, ...] = ()
    #: Makes the id of a fact the owner names itself (a return no order asked for). The live
    #: owner's are random; the simulator's count, so that a run can be repeated exactly.
    new_id: Callable[[str], str] = new_id
    #: Those of its resources a scheduler's bridge shows the scheduler (Slurm's licenses): a return of their
    #: units is called once the scheduler is seen holding them back (``owner.requests``).
    shown: frozenset[str] = frozenset()

    @classmethod
    def of(cls, config: ProviderConfig, policy: PolicyConfig, resources: Sequence[ResourceConfig],
           new_id: Callable[[str], str] = new_id, shown: Collection[str] = ()) -> OwnerSettings:
        mine = tuple(r for r in resources if r.provider == config.name)
        return cls(config, policy, mine, new_id, frozenset(shown) & {r.name for r in mine})

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def kind(self) -> str:
        return self.config.kind

    @property
    def takes_token(self) -> bool:
        """Whether a repeated call can carry its token (v2), so the provider dedupes it."""
        return self.config.script.style == "v2"

    def can(self, action: Action) -> bool:
        return supports(self.config.script.style, action)

    @property
    def tags(self) -> dict[str, str]:
        """What marks supply as ours at the provider: every request carries it, ``list`` asks by it."""
        return {"provisioner-provider": self.name}
