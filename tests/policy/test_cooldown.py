"""Cooldowns from the request history: exponential, capped, scoped, and cleared by success."""

from __future__ import annotations

from messages.demand import HostItem
from messages.facts import LeaseChanged, ProviderAdmin, ProviderDescribed, ProviderReconfigured
from persistence.snapshot import decode, encode
from policy.cooldown import cleared, cooldowns
from policy.planning import PlanSettings, plan
from state.projection import Projection
from tests.support.policy import T0, completed_request, demand, failed_request, feed, hosts, view


def _cool(p, now, base=60, cap=300):
    return cooldowns(p.requests.values(), now, base, cap)


def test_each_failure_in_a_row_doubles_the_cooldown_up_to_the_cap():
    p = Projection()
    at = T0
    waits = []
    for n in range(5):
        failed_request(p, "a", "a-t", f"r{n}", at=at, outcome="failed")
        c = _cool(p, at)[("a", "")]
        waits.append(c.until - at)
        assert c.strikes == n + 1 and c.cause == "a failed request"
        at = c.until + 1  # tried again right after the cooldown, and failed again
    assert waits == [60, 120, 240, 300, 300]


def test_capacity_cools_only_the_template_and_other_failures_the_whole_provider():
    p = Projection()
    failed_request(p, "a", "a-big", "r1", at=T0, outcome="capacity")
    assert set(_cool(p, T0 + 1)) == {("a", "a-big")}
    failed_request(p, "a", "a-small", "r2", at=T0 + 2, outcome="timeout")
    cool = _cool(p, T0 + 3)
    assert set(cool) == {("a", "a-big"), ("a", "")} and cool[("a", "")].cause == "a request of unknown outcome"
    failed_request(p, "b", "b-t", "r3", at=T0 + 2, state="timed_out", outcome=None)
    assert _cool(p, T0 + 3)[("b", "")].cause == "a request timed out"


def test_a_cooldown_ends_and_a_success_clears_the_strikes():
    p = Projection()
    failed_request(p, "a", "a-t", "r1", at=T0, outcome="capacity")
    assert _cool(p, T0 + 59) and not _cool(p, T0 + 60)
    failed_request(p, "a", "a-t", "r2", at=T0 + 61, outcome="capacity")
    assert _cool(p, T0 + 62)[("a", "a-t")].strikes == 2
    completed_request(p, "a", "a-t", "ok", at=T0 + 200)
    failed_request(p, "a", "a-t", "r3", at=T0 + 300, outcome="capacity")
    assert _cool(p, T0 + 301)[("a", "a-t")].strikes == 1, "the success in between started the count afresh"


def test_an_old_bad_spell_is_forgotten():
    p = Projection()
    failed_request(p, "a", "a-t", "r1", at=T0, outcome="failed")
    failed_request(p, "a", "a-t", "r2", at=T0 + 61, outcome="failed")
    # The second cooldown ended at T0 + 181; a failure more than ``cap`` after that counts as the first.
    failed_request(p, "a", "a-t", "r3", at=T0 + 181 + 301, outcome="failed")
    assert _cool(p, T0 + 483)[("a", "")].strikes == 1


# --- a changed provider starts afresh (issue 34, item 4) ---------------------------------------------


class _Logged(Projection):
    """A projection that keeps the facts it was fed: what a restart replays."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list = []

    def apply_all(self, facts) -> int:
        facts = list(facts)
        self.log += facts
        return super().apply_all(facts)


def _cleared(p, now, base=60, cap=300):
    return cooldowns(p.requests.values(), now, base, cap, cleared(p.providers))


def _described(p: Projection, name: str) -> None:
    feed(p, name, ProviderDescribed(description=hosts(name).description), now=T0 - 10)
    feed(p, name, LeaseChanged(kind="lease_acquired", name=f"provider:{name}", holder="x", fence=1), now=T0 - 10)


def _ordered(p: Projection, now: float) -> list[tuple[str, int]]:
    out = plan(demand(HostItem(id="d", count=3)), p.providers, view(p), now, PlanSettings(cooldown=60,
                                                                                       backoff_max=300))
    return [(provider, o.count) for provider, o in out.orders]


def test_a_reload_that_changed_the_provider_ends_the_cooldowns_of_its_old_settings():
    """The env_file lacked PATH, every request failed: after the fix and a reload, the provider is not left
    cooling down for what its old settings did (it stayed so until the cooldown ran out)."""
    p = _Logged()
    for name in ("a", "b"):
        _described(p, name)
    failed_request(p, "a", "a-t", "r1", at=T0 + 50, outcome="failed")
    failed_request(p, "a", "a-t", "r2", at=T0 + 61, outcome="capacity")
    failed_request(p, "b", "b-t", "r3", at=T0 + 61, outcome="failed")
    assert set(_cleared(p, T0 + 62)) == {("a", ""), ("a", "a-t"), ("b", "")}
    assert _ordered(p, T0 + 62) == []

    feed(p, "a", ProviderReconfigured(changed=["env_file"]), now=T0 + 70)
    assert set(_cleared(p, T0 + 71)) == {("b", "")}, "only the changed provider starts afresh"
    assert _ordered(p, T0 + 71) == [("a", 3)]
    # A failure under the new settings counts again, as the first of a new count.
    failed_request(p, "a", "a-t", "r4", at=T0 + 80, outcome="failed")
    assert _cleared(p, T0 + 81)[("a", "")].strikes == 1

    # A restart agrees: the facts alone, replayed or restored from a snapshot, say the same.
    again = Projection()
    again.apply_all(p.log)
    restored = decode(encode(again, p.log[-1].id, {})).projection()
    for other in (again, restored):
        assert other.providers["a"].strikes_cleared_at == p.providers["a"].strikes_cleared_at == T0 + 70
        assert {k: (c.until, c.strikes) for k, c in _cleared(other, T0 + 81).items()} == {
            k: (c.until, c.strikes) for k, c in _cleared(p, T0 + 81).items()}


def test_an_operators_resume_ends_the_cooldowns_of_an_unchanged_provider():
    p = Projection()
    _described(p, "a")
    failed_request(p, "a", "a-t", "r1", at=T0, outcome="failed")
    assert _ordered(p, T0 + 10) == []
    feed(p, "a", ProviderAdmin(kind="provider_resumed", reason="operator: fixed"), now=T0 + 20)
    assert _ordered(p, T0 + 21) == [("a", 3)] and not _cleared(p, T0 + 21)


def test_failures_recorded_before_the_reload_are_cleared_even_when_their_clock_ran_ahead():
    """The log's order decides: a request whose end was stamped after the reload's time (another host's
    clock ahead) but recorded before it counts no more than the others."""
    p = Projection()
    _described(p, "a")
    failed_request(p, "a", "a-t", "r1", at=T0 + 100, outcome="failed")
    feed(p, "a", ProviderReconfigured(changed=["script"]), now=T0 + 50)
    assert not _cleared(p, T0 + 101) and p.providers["a"].strikes_cleared_at == T0 + 100
