"""The auditor's catch-up of a long history keeps to its share of the time."""

from __future__ import annotations

import pytest

from provisioner.audit.auditor import PACE, SHARE, pause


def test_a_quick_slice_waits_the_least_pause():
    assert pause(0.0) == PACE


@pytest.mark.parametrize("took", [0.05, 0.5, 3.0])
def test_a_slow_slice_waits_for_the_rest_of_its_share(took):
    assert took / (took + pause(took)) == pytest.approx(SHARE)
