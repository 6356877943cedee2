"""The simulated scheduler: which hosts work, which fall idle, and the unmet need it publishes.

``assign`` keeps its hosts grouped by item between calls and reports only the
hosts whose state flips; these tests hold it to what a fresh look at every
host would say, across joins, leaves, rejoins and hosts taking up another item.
"""

from __future__ import annotations

from messages.demand import HostItem, UnitItem
from sim.scheduler import Host, Scheduler


def _host(key: str, item: str, joined_at: float, template: str = "big") -> Host:
    return Host(key=key, name=key, provider="a", template=template, item=item, joined_at=joined_at)


def _fits(item: HostItem, host: Host) -> bool:
    """A host serves an item that names its template, or names none."""
    return item.template in (None, host.template)


def _states(s: Scheduler) -> dict[str, bool]:
    return {key: h.busy for key, h in s.hosts.items()}


def test_changes_come_in_join_order_and_only_for_hosts_that_flip() -> None:
    s = Scheduler(_fits)
    s.want(HostItem(id="x", count=2))
    for k, key in enumerate(["h1", "h2", "h3"]):
        s.join(_host(key, "x", joined_at=float(k)))
    changes, unmet = s.assign()
    assert [(h.key, e) for h, e in changes] == [("h1", "busy"), ("h2", "busy")]
    assert unmet == {"x": 0}
    assert s.assign()[0] == []  # nothing moved: nothing to say

    s.want(HostItem(id="x", count=1))  # the newest falls idle first
    assert [(h.key, e) for h, e in s.assign()[0]] == [("h2", "idle")]
    assert _states(s) == {"h1": True, "h2": False, "h3": False}


def test_a_host_that_leaves_and_joins_again_is_reported_in_its_new_place() -> None:
    s = Scheduler(_fits)
    s.want(HostItem(id="x", count=3))
    for k, key in enumerate(["h1", "h2", "h3"]):
        s.join(_host(key, "x", joined_at=float(k)))
    s.assign()
    assert s.leave("h1") is not None
    assert s.leave("never-joined") is None
    s.want(HostItem(id="x", count=0))
    s.join(_host("h1", "x", joined_at=10.0))
    changes, unmet = s.assign()
    # h2 and h3 were busy and fall idle; h1 joined again idle and stays so: nothing to say of it.
    assert [(h.key, e) for h, e in changes] == [("h2", "idle"), ("h3", "idle")]
    s.want(HostItem(id="x", count=3))
    assert [(h.key, e) for h, e in s.assign()[0]] == [("h2", "busy"), ("h3", "busy"), ("h1", "busy")]
    assert unmet == {"x": 0}


def test_an_idle_host_taken_up_by_another_item_works_for_it_afterwards() -> None:
    s = Scheduler(_fits)
    s.want(HostItem(id="x", count=0))
    s.want(HostItem(id="y", count=1, template="big"))
    s.join(_host("h1", "x", joined_at=0.0))
    changes, unmet = s.assign()
    assert [(h.key, e) for h, e in changes] == [("h1", "busy")]
    assert s.hosts["h1"].item == "y" and unmet == {"x": 0, "y": 0}

    # It is y's host now: x wanting one more does not take it, and x's need shows.
    s.want(HostItem(id="x", count=1))
    changes, unmet = s.assign()
    assert changes == [] and unmet == {"x": 1, "y": 0}
    s.want(HostItem(id="y", count=0))  # y lets it go: x takes it up
    changes, unmet = s.assign()
    assert changes == [] and s.hosts["h1"].item == "x" and unmet == {"x": 0, "y": 0}
    s.want(HostItem(id="x", count=0))
    assert [(h.key, e) for h, e in s.assign()[0]] == [("h1", "idle")]


def test_a_snapshot_says_each_items_unmet_need_whatever_the_work_wants() -> None:
    s = Scheduler(_fits)
    s.want(HostItem(id="x", count=2, select={"ncpus": ">=8"}))
    s.want(UnitItem(id="lic", resource="vcs", count=5))
    first = s.demand({"x": 2}, {"vcs": 0}, now=0.0)
    assert first is not None and [(i.id, i.count) for i in first.items] == [("x", 2), ("lic", 5)]
    assert first.items[0].select == {"ncpus": ">=8"}

    # The work wants more hosts, but the unmet need is what it was: no new snapshot.
    s.want(HostItem(id="x", count=4, select={"ncpus": ">=8"}))
    assert s.demand({"x": 2}, {"vcs": 0}, now=1.0) is None
    # The licenses arrive: the need for them drops; the host item still says 2, with its selector.
    second = s.demand({"x": 2}, {"vcs": 5}, now=2.0)
    assert second is not None and second.seq == first.seq + 1
    assert [(i.id, i.count) for i in second.items] == [("x", 2), ("lic", 0)]
    assert second.items[0].select == {"ncpus": ">=8"}
    # A selector that changes is published as it is now, even with the same unmet count.
    s.want(HostItem(id="x", count=4, select={"ncpus": ">=16"}))
    third = s.demand({"x": 2}, {"vcs": 4}, now=3.0)
    assert third is not None and [(i.id, i.count) for i in third.items] == [("x", 2), ("lic", 1)]
    assert third.items[0].select == {"ncpus": ">=16"}
