"""When a provider's owner tries a failed script call again, and when it gives up.

A request or return whose script failed is tried again on the same provider,
with the same idempotency token, after a backoff that doubles up to
``backoff_max``, until ``MAX_ATTEMPTS`` calls have failed. Capacity
(exit 69), credentials and configuration errors are never retried here:
the first moves the need to the next provider, the others disable the
provider. A timed-out call is retried only where a repeat is safe: with a
token (v2 scripts), or for a return, which names its machines.
"""

from __future__ import annotations

#: Script failures after which a request is given up (transient ones are retried until then).
MAX_ATTEMPTS = 5

#: Outcomes of a failed call that a later call may get past.
RETRYABLE = frozenset({"transient", "failed", "bad_output"})


def backoff(attempts: int, cap: float, base: float = 1.0) -> float:
    """Seconds to wait after ``attempts`` failed calls before the next one."""
    return min(cap, base * (2 ** max(0, attempts - 1)))


def retryable(outcome: str | None, takes_token: bool, action: str) -> bool:
    """True when a call that ended with ``outcome`` may be repeated (attempts permitting)."""
    return outcome in RETRYABLE or (outcome == "timeout" and (takes_token or action == "return"))


def try_again(outcome: str | None, takes_token: bool, action: str, attempts: int) -> bool:
    """True when the owner calls again rather than failing the request (``attempts`` failed so far)."""
    return retryable(outcome, takes_token, action) and attempts + 1 < MAX_ATTEMPTS
