"""A reloaded config for the actors that run on it (``provisioner/daemon/reloading.py`` sends it).

The one message that carries the config, so it is written here, above the config floor, rather than in
``messages`` (the vocabulary imports nothing above it, and would have had to call the config ``Any``).
"""

from __future__ import annotations

from config.models import Config
from messages.commands import ActorMessage


class Reconfigure(ActorMessage):
    """``config`` is the config now in force; ``restart`` names the providers whose owner is to be replaced
    rather than told (their script changed)."""

    config: Config
    restart: frozenset[str] = frozenset()
