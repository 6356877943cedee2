"""Fixtures of the owner's tests: a hosts and a units provider's settings."""

from __future__ import annotations

from tests.support.owners import hosts, units  # noqa: F401  (fixtures)
