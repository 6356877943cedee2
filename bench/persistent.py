"""Status calls per second through one Python provider: persistent (one process) against one-shot runs.

The same small Python provider serves both ways: one-shot, each call starts
an interpreter (the cost a real provider pays again, with its SDK, on every
status poll); persistent, one ``serve`` process answers every call through
``providers.serving``. Both go through the daemon's own runners, with the
provider's ``max_concurrent`` at 8, so each figure is what an owner would see.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

from config.models import ProviderConfig
from providers.persistent import PersistentRunner
from providers.runner import ScriptRunner

#: A status call answered from the request ids it was given, either way the provider is run.
PROVIDER = '''#!{python}
import json, sys

def status(doc):
    return {{"requests": [{{"requestId": r["requestId"], "status": "running", "machines": []}}
                          for r in doc["requests"]]}}

if sys.argv[1:] == ["serve"]:
    from providers.serving import serve
    sys.exit(serve(lambda action, doc, deadline: {{"exit": 0, "output": status(doc)}}, ["status"]))
with open(sys.argv[3]) as f:
    print(json.dumps(status(json.load(f))))
'''


def _provider(tmp: Path, mode: str) -> ProviderConfig:
    script = tmp / "provider"
    if not script.exists():
        script.write_text(PROVIDER.format(python=sys.executable))
        script.chmod(0o755)
    return ProviderConfig.model_validate({"name": "bench", "kind": "hosts", "script": {
        "style": "v2", "path": str(script), "mode": mode, "max_concurrent": 8, "timeout": "60s"}})


def _rate(runner_for: Any, n: int) -> float:
    """Calls answered per second: ``n`` status calls submitted at once, timed until the last answer."""
    done = threading.Semaphore(0)
    failures: list[str] = []

    def on_result(result: Any, _tag: object) -> None:
        if not result.ok:
            failures.append(result.reason)
        done.release()

    runner = runner_for(on_result)
    try:
        runner.submit("status", {"requests": [{"requestId": "warm-up"}]})  # the persistent process starts here
        if not done.acquire(timeout=60):
            raise RuntimeError("persistent bench: no answer to the first call")
        started = time.perf_counter()
        for k in range(n):
            runner.submit("status", {"requests": [{"requestId": f"r-{k}"}]})
        for _ in range(n):
            if not done.acquire(timeout=120):
                raise RuntimeError("persistent bench: answers stopped coming")
        elapsed = time.perf_counter() - started
    finally:
        runner.stop()
    if failures:
        raise RuntimeError(f"persistent bench: {len(failures)} failures, e.g. {failures[0]}")
    return n / elapsed


def status_calls(tmp: Path, smoke: bool) -> tuple[float, float, float]:
    """Calls per second persistent and one-shot, and how many times faster persistent is."""
    persistent_cfg, oneshot_cfg = _provider(tmp, "persistent"), _provider(tmp, "oneshot")
    persistent = _rate(lambda on: PersistentRunner(persistent_cfg, tmp / "work", on), 200 if smoke else 20_000)
    oneshot = _rate(lambda on: ScriptRunner(oneshot_cfg, tmp / "work", on), 10 if smoke else 400)
    return persistent, oneshot, persistent / oneshot
