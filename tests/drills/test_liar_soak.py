"""Drill 5, the liar soak, short: a real daemon against providers that lie, fail and are slow, killed now and
then; then no demand, every host idle, and the providers' ground truth held against the facts.

``make bench`` runs it for minutes; ``SOAK_SEEDS=1,2,3 SOAK_SECONDS=120`` runs longer ones here
(docs/recovery.md, "The liar soak").
"""

from __future__ import annotations

import os

import pytest

from tests.support import soak

pytestmark = pytest.mark.slow

#: Seed 25's workload within 15 s: 6 hosts busy and 1 token in use, then none and 3, then 8 and 1.
SEEDS = [int(s) for s in os.environ.get("SOAK_SEEDS", "25").split(",")]
STORM = float(os.environ.get("SOAK_SECONDS", "15"))


@pytest.mark.parametrize("seed", SEEDS)
def test_the_liar_soak_leaks_nothing_doubles_nothing_and_returns_no_unit_in_use(tmp_path, seed):
    r = soak.run(tmp_path, soak.Plan(seed=seed, storm=STORM, calm=25.0))
    print(r.summary())
    if not r.clean:
        print(f"----- the daemon's last lines -----\n{r.tail}")
    assert r.kills >= 1 and sum(n for kinds in r.injected.values() for n in kinds.values()) > 0, \
        "the storm had its kills and its faults"
    assert r.machines > 0 and r.grants > 0, "hosts and units were made, and given back"
    assert r.settled, f"not settled within the calm:\n{r.ledger.explain()}"
    assert r.ledger.leaked_seconds == 0, r.ledger.explain()
    assert r.ledger.double_creations == 0, r.ledger.explain()
    assert r.ledger.units_returned_in_use == 0, r.ledger.explain()
    assert r.ledger.held_at_end == [], r.ledger.explain()
