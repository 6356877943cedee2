"""Providers take requests and returns in steps: a minimum amount, then multiples of a step."""

from __future__ import annotations


def size(need: int, room: int, min_request: int, step: int) -> int:
    """``need`` rounded up to the provider's granularity, never above ``room``; 0 if nothing granular fits.

    Rounding up rather than down is what meets demand; when the rounded amount
    does not fit, the largest granular amount that does is taken instead, so a
    clamp (capacity, caps, budget) never yields an amount the provider refuses.
    """
    if need <= 0 or room <= 0:
        return 0
    amount = max(need, min_request)
    if step > 1 and (amount - min_request) % step:
        amount += step - (amount - min_request) % step
    return amount if amount <= room else size_down(room, min_request, step)


def size_down(limit: int, min_request: int, step: int) -> int:
    """The largest granular amount (``min_request`` plus whole steps) not above ``limit``; 0 if none.

    What may be given back when only ``limit`` units are spare: rounding a
    return up would give back units that are in use or wanted.
    """
    if limit < min_request:
        return 0
    return min_request + ((limit - min_request) // step) * step
