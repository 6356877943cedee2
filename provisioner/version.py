"""The installed package's version: what ``provisioner --version``, ``/healthz`` and ``provisioner_build_info`` say."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _installed


def version() -> str:
    """``X.Y.Z`` from the installed package's metadata; ``unknown`` for a source tree never installed."""
    try:
        return _installed("provisioner")
    except PackageNotFoundError:
        return "unknown"
