"""Errors every port of the controller raises, so each layer can name them without importing a backend.

Expected outcomes (a stale fence, a lease held by someone else, nothing new
yet) are results, never exceptions: only a controller out of reach raises.
"""

from __future__ import annotations


class ControllerUnavailable(RuntimeError):
    """The controller could not be reached or did not answer in time."""
