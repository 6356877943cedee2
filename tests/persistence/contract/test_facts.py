"""Facts: fenced appends, idempotent ids, seq order, paging."""

from __future__ import annotations

from persistence.port import Controller
from tests.persistence.contract.conftest import MakeController
from tests.support.controllers import FakeClock, usage

NAME = "provider:aws-east"


def test_append_under_current_fence_is_accepted_with_growing_seqs(controller: Controller) -> None:
    lease = controller.leases.acquire(NAME, "a", ttl=10)
    assert lease is not None
    facts = [usage(i, lease=lease) for i in range(3)]
    result = controller.append(facts)
    assert result.refused == []
    assert [f.id for f in result.accepted] == [f.id for f in facts]
    seqs = [f.seq for f in result.accepted]
    assert all(isinstance(s, int) and s > 0 for s in seqs)
    assert seqs == sorted(set(seqs))
    assert controller.last_seq() == seqs[-1]
    assert [f.model_copy(update={"seq": None}) for f in result.accepted] == facts


def test_read_returns_what_was_appended_in_seq_order(controller: Controller) -> None:
    first = controller.append([usage(1), usage(2)]).accepted
    second = controller.append([usage(3)]).accepted
    stored = controller.read()
    assert stored == first + second
    assert [f.seq for f in stored] == sorted({f.seq for f in stored})
    assert second[0].seq > first[-1].seq


def test_stale_fence_refused_after_another_holder_acquired(controller: Controller, clock: FakeClock) -> None:
    old = controller.leases.acquire(NAME, "a", ttl=10)
    assert old is not None
    clock.advance(10)
    new = controller.leases.acquire(NAME, "b", ttl=10)
    assert new is not None
    stale = usage(1, lease=old)
    result = controller.append([stale])
    assert result.accepted == []
    [refused] = result.refused
    assert (refused.id, refused.lease, refused.fence) == (stale.id, NAME, old.fence)
    assert str(new.fence) in refused.reason and str(old.fence) in refused.reason
    assert NAME in refused.reason
    assert controller.read() == []
    assert controller.append([usage(2, lease=new)]).refused == []


def test_expired_lease_refused(controller: Controller, clock: FakeClock) -> None:
    lease = controller.leases.acquire(NAME, "a", ttl=10)
    assert lease is not None
    clock.advance(10)
    [refused] = controller.append([usage(1, lease=lease)]).refused
    assert "expired" in refused.reason
    assert controller.last_seq() == 0


def test_released_lease_refused(controller: Controller) -> None:
    lease = controller.leases.acquire(NAME, "a", ttl=10)
    assert lease is not None and controller.leases.release(lease)
    [refused] = controller.append([usage(1, lease=lease)]).refused
    assert "released" in refused.reason


def test_unknown_lease_refused(controller: Controller) -> None:
    fact = usage(1).model_copy(update={"lease": "provider:nobody", "fence": 1})
    [refused] = controller.append([fact]).refused
    assert "no such lease" in refused.reason and "provider:nobody" in refused.reason
    assert controller.read() == []


def test_mixed_batch_is_decided_per_lease(controller: Controller, clock: FakeClock) -> None:
    stale = controller.leases.acquire("provider:x", "a", ttl=10)
    assert stale is not None
    clock.advance(10)
    current_x = controller.leases.acquire("provider:x", "b", ttl=10)
    good = controller.leases.acquire("provider:y", "a", ttl=10)
    assert current_x is not None and good is not None
    batch = [
        usage(1, lease=good),
        usage(2, lease=stale),
        usage(3),
        usage(4, lease=current_x),
        usage(5, lease=stale),
        usage(6, lease=good),
    ]
    result = controller.append(batch)
    assert [f.id for f in result.accepted] == [batch[i].id for i in (0, 2, 3, 5)]
    assert [r.id for r in result.refused] == [batch[1].id, batch[4].id]
    assert [f.id for f in controller.read()] == [batch[i].id for i in (0, 2, 3, 5)]


def test_unfenced_facts_always_accepted(controller: Controller, clock: FakeClock) -> None:
    lease = controller.leases.acquire(NAME, "a", ttl=1)
    assert lease is not None
    clock.advance(5)
    result = controller.append([usage(1), usage(2)])
    assert result.refused == [] and len(result.accepted) == 2


def test_duplicate_id_is_idempotent(controller: Controller) -> None:
    original = controller.append([usage(1, fact_id="req-1")]).accepted[0]
    retry = controller.append([usage(1, fact_id="req-1"), usage(2, fact_id="req-2")])
    assert retry.refused == []
    assert retry.accepted[0] == original
    assert [f.id for f in controller.read()] == ["req-1", "req-2"]


def test_duplicate_id_within_one_batch_stored_once(controller: Controller) -> None:
    result = controller.append([usage(1, fact_id="x-1"), usage(2, fact_id="x-2"), usage(1, fact_id="x-1")])
    assert [f.id for f in result.accepted] == ["x-1", "x-1", "x-2"]
    assert result.accepted[0].seq == result.accepted[1].seq
    assert [f.id for f in controller.read()] == ["x-1", "x-2"]


def test_retry_of_stored_fact_accepted_even_after_its_lease_moved_on(
    controller: Controller, clock: FakeClock
) -> None:
    lease = controller.leases.acquire(NAME, "a", ttl=10)
    assert lease is not None
    stored = controller.append([usage(1, lease=lease, fact_id="intent-1")]).accepted[0]
    clock.advance(10)
    assert controller.leases.acquire(NAME, "b", ttl=10) is not None
    retry = controller.append([usage(1, lease=lease, fact_id="intent-1")])
    assert retry.accepted == [stored] and retry.refused == []


def test_read_pages_with_after_and_limit(controller: Controller) -> None:
    for start in range(0, 25, 5):
        controller.append([usage(i) for i in range(start, start + 5)])
    everything = controller.read()
    assert len(everything) == 25
    pages, after = [], 0
    while page := controller.read(after=after, limit=7):
        assert len(page) <= 7
        pages.append(page)
        after = page[-1].seq
    assert [len(p) for p in pages] == [7, 7, 7, 4]
    assert [f for p in pages for f in p] == everything
    assert controller.read(after=everything[-1].seq) == []
    assert controller.read(after=everything[9].seq, limit=3) == everything[10:13]


def test_last_seq_is_zero_when_empty(controller: Controller) -> None:
    assert controller.last_seq() == 0
    assert controller.read() == []


def test_second_handle_sees_facts_of_the_first(make_controller: MakeController) -> None:
    first, second = make_controller(), make_controller()
    lease = first.leases.acquire(NAME, "a", ttl=10)
    assert lease is not None
    appended = first.append([usage(1, lease=lease)]).accepted
    assert second.read() == appended
    assert second.last_seq() == appended[0].seq
    more = second.append([usage(2, lease=lease)]).accepted
    assert more[0].seq > appended[0].seq
    assert first.read() == appended + more


def test_a_retry_through_another_handle_finds_the_stored_facts_and_appends_only_the_new(
    make_controller: MakeController,
) -> None:
    first, second = make_controller(), make_controller()
    lease = first.leases.acquire(NAME, "a", ttl=10)
    assert lease is not None
    stored = first.append([usage(i, lease=lease, fact_id=f"intent-{i}") for i in range(3)]).accepted
    # The second handle has not seen the log move: its first try meets a newer head, its next the stored ids.
    retry = second.append([usage(i, lease=lease, fact_id=f"intent-{i}") for i in (2, 3, 0)])
    assert retry.refused == []
    assert retry.accepted[:2] == [stored[0], stored[2]]
    [new] = retry.accepted[2:]
    assert new.id == "intent-3" and new.seq == stored[-1].seq + 1
    assert [f.id for f in first.read()] == ["intent-0", "intent-1", "intent-2", "intent-3"]
    again = first.append([usage(3, lease=lease, fact_id="intent-3"), usage(4, lease=lease, fact_id="intent-4")])
    assert again.accepted[0] == new and again.accepted[1].seq == new.seq + 1
