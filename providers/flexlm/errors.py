"""Failures that end a call, each with the exit code the v2 contract gives it.

The daemon acts on the exit code alone (retry, cool down, disable), so every
failure the provider can name is raised as one of these and never as a bare
exception, which would exit 1 and be retried blindly.
"""

from __future__ import annotations


class ProviderError(Exception):
    exit_code = 1


class BadUsage(ProviderError):
    """The command line is wrong: a person typed it, not the daemon."""

    exit_code = 64


class BadInput(ProviderError):
    """The input document is malformed, or a token is repeated for a different call."""

    exit_code = 65


class PoolExhausted(ProviderError):
    """Nothing can be lent now: the daemon moves the demand elsewhere and cools this provider down."""

    exit_code = 69


class Transient(ProviderError):
    """The license server or the ledger cannot be reached now; the same call may work after a backoff."""

    exit_code = 75


class ConfigError(ProviderError):
    """The settings, or a feature the license server does not serve: an operator has to act."""

    exit_code = 78
