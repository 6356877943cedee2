"""A doorbell on an etcd key range: wakes readers when something under it changes.

The bell carries no data. Readers read what is new by key (facts by seq),
never from the watch's event history, so compaction cannot lose them; the
watch only saves them from polling. It survives what a plain watch stream
does not:

- **etcd restarts, a member goes away, a link breaks**: the stream ends or
  stays silent past ``IDLE`` seconds; the bell reconnects (to the next member
  if need be) with backoff and resumes from the revision after the last
  event it saw, so events in between are replayed.
- **compaction**: a resume point older than the compacted revision gets the
  watch cancelled with etcd's compact revision; the bell rings (readers look
  again, which finds whatever was missed) and watches on from there.

A reader that captured revision R with its last read waits for
``wait_beyond(R)``: any change after R rings, so a write landing between
the read and the wait is never slept through.
"""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any

import orjson
import requests

from lease.etcd_client import EtcdClient, b64, prefix_end
from messages.errors import ControllerUnavailable

log = logging.getLogger(__name__)

#: Longest silence on a watch stream before it is taken for dead and reopened.
IDLE = 30.0
BACKOFF_MIN = 0.1
BACKOFF_MAX = 2.0


class WatchBell:
    """Watches ``prefix`` from ``start_revision`` on its own thread until closed."""

    def __init__(self, client: EtcdClient, prefix: bytes, start_revision: int) -> None:
        self._client = client
        self._range = {"key": b64(prefix), "range_end": b64(prefix_end(prefix))}
        self._next = start_revision
        self._seen = start_revision - 1
        self._changed = threading.Condition()
        self._closed = threading.Event()
        self._response: requests.Response | None = None
        self._thread = threading.Thread(target=self._run, name=f"watch {client.location}", daemon=True)
        self._thread.start()

    def wait_beyond(self, revision: int, timeout: float) -> bool:
        """Wait until a change after ``revision`` is seen; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: self._seen > revision, timeout=max(0.0, timeout))

    def _ring(self, revision: int) -> None:
        with self._changed:
            if revision > self._seen:
                self._seen = revision
                self._changed.notify_all()

    def _run(self) -> None:
        backoff = BACKOFF_MIN
        while not self._closed.is_set():
            try:
                self._follow()
                backoff = BACKOFF_MIN
                self._closed.wait(BACKOFF_MIN)  # never a tight loop, even if streams keep ending at once
            except (ControllerUnavailable, requests.RequestException, OSError, ValueError) as exc:
                if self._closed.is_set():
                    return
                log.warning("controller %s: watch interrupted, resuming from revision %d: %s",
                            self._client.location, self._next, " ".join(str(exc).split())[:300])
                self._closed.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)

    def _follow(self) -> None:
        """One watch stream, until it ends, goes silent or is cancelled."""
        request = {"create_request": {**self._range, "start_revision": self._next}}
        response = self._client.stream("watch", request, idle=IDLE)
        self._response = response
        try:
            if self._closed.is_set():
                return
            for line in response.iter_lines():
                if line and not self._handle(orjson.loads(line)):
                    return
        except (requests.RequestException, OSError) as exc:
            # An open stream that broke or went silent: open another at once; failing to open one is logged.
            log.debug("controller %s: watch stream ended: %s", self._client.location, exc)
        finally:
            self._response = None
            response.close()

    def _handle(self, message: dict[str, Any]) -> bool:
        """Take one watch response; False when this stream is over."""
        result = message.get("result")
        if result is None:
            raise ValueError(f"watch error: {message.get('error', message)}")
        if "compact_revision" in result:
            # History before compact_revision is gone: readers look again, the watch goes on from there.
            compacted = int(result["compact_revision"])
            log.info("controller %s: watch resumes at compacted revision %d", self._client.location, compacted)
            self._next = max(self._next, compacted)
            # Only events below ``compacted`` were lost: a reader that read past it missed nothing.
            self._ring(compacted)
            return False
        if result.get("canceled"):
            raise ValueError(f"watch cancelled: {result.get('cancel_reason', 'no reason given')}")
        events = result.get("events")
        if events:
            latest = max(int(event["kv"]["mod_revision"]) for event in events)
            self._next = max(self._next, latest + 1)
            self._ring(latest)
        return True

    def close(self) -> None:
        self._closed.set()
        response = self._response
        if response is not None:
            # Closing a socket does not wake a thread blocked reading it; shutting it down does.
            try:
                sock = socket.fromfd(response.raw.fileno(), socket.AF_INET, socket.SOCK_STREAM)
                sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            except (OSError, ValueError, AttributeError):
                pass
        self._thread.join(timeout=5)
