"""The live ``ProviderCalls``: each of an owner's calls is one run of its provider's script, or one call
to its persistent process (``providers.persistent``), which takes calls the way the script runner does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from messages.scripts import ScriptResult
from owner.calls import Call, CallDone, OnDone
from providers.persistent import PersistentRunner
from providers.runner import ScriptRunner


class ScriptCalls:
    """Calls as script runs (``providers.runner``): bounded in time, output and number, off the owner's thread.

    ``observe`` sees every result on its way back (the daemon's metrics).
    """

    def __init__(self, runner_for: Callable[[Callable[[ScriptResult, Any], None]], ScriptRunner | PersistentRunner],
                 on_done: OnDone, may_act: Callable[[], bool],
                 observe: Callable[[ScriptResult], None] | None = None) -> None:
        self.on_done = on_done
        self.observe = observe
        self.runner = runner_for(self._finished)
        # Asked right before each spawn (or each call sent to a persistent process): a run queued while the
        # lease was held must not start after it lapsed.
        self.runner.may_act = may_act

    def submit(self, call: Call) -> None:
        self.runner.submit(call.action, call.document, token=call.token, tag=call)

    def stop(self) -> None:
        """Kill what runs: those calls' outcomes are unknown, as after a timeout."""
        self.runner.stop(kill=True)

    def health(self) -> str:
        """Why the provider is degraded (its persistent process cannot start or keeps dying); empty when
        it is fine, and always for one-shot runs, which have no process to keep."""
        return self.runner.health()

    def _finished(self, result: ScriptResult, call: Any) -> None:
        try:
            if self.observe is not None:
                self.observe(result)
        finally:
            self.on_done(CallDone(call, result))
