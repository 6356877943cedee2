"""Persistent providers: one long-running ``serve`` process per provider, spoken to in JSON lines.

``PersistentRunner`` (``runner.py``) supervises the process and answers the
owner's calls through it; ``process.py`` starts and ends the process,
``lines.py`` cuts its output into bounded lines, ``answers.py`` judges an
answer as a one-shot run would be judged, ``status.py`` says how it is doing.
The provider's side of the protocol is ``providers.serving``.
"""

from providers.persistent.runner import PROTOCOL, PersistentRunner
from providers.persistent.status import Status

__all__ = ["PROTOCOL", "PersistentRunner", "Status"]
