"""Tailing survives what a plain etcd watch does not: a restarted member and compaction."""

from __future__ import annotations

import threading
import time
from typing import Callable

import pytest

from lease.etcd_client import EtcdClient, EtcdTarget
from persistence.controller import open_controller
from persistence.etcd_watch import WatchBell
from persistence.port import Changes, Cursor
from tests.support.controllers import usage
from tests.support.etcd.cluster import Cluster

pytestmark = pytest.mark.slow

LONG = 30.0


def _wait_in_thread(call: Callable[[], Changes]) -> tuple[threading.Thread, list[Changes]]:
    results: list[Changes] = []
    waiter = threading.Thread(target=lambda: results.append(call()))
    waiter.start()
    return waiter, results


def test_a_waiting_reader_wakes_for_a_write_after_etcd_restarted(own_cluster: Callable[..., Cluster]) -> None:
    cluster = own_cluster()
    url = cluster.url("restart") + "?timeout=0.5"
    reader, writer = open_controller(url), open_controller(url)
    try:
        before = writer.append([usage(1)]).accepted
        cursor = reader.changes(Cursor(), timeout=0).cursor
        waiter, results = _wait_in_thread(lambda: reader.changes(cursor, timeout=LONG))
        time.sleep(0.3)  # the reader is waiting on its watch: the path under test
        member = cluster.members[0]
        member.kill()
        time.sleep(0.5)
        member.start()
        member.wait_healthy()
        after = writer.append([usage(2)]).accepted
        waiter.join(LONG + 5)
        [got] = results
        assert got.facts == after, "woken by the resumed watch, not returned empty at its timeout"
        assert reader.read() == before + after
    finally:
        reader.close()
        writer.close()


def test_the_bell_rings_past_compaction_and_keeps_watching(etcd_url: str) -> None:
    client = EtcdClient(EtcdTarget.from_url(etcd_url))
    c = open_controller(etcd_url)
    bell = None
    try:
        first = client.put(client.key("head", "x"), b"1")
        for n in range(5):
            c.append([usage(n)])
        latest = client.put(client.key("head", "x"), b"2")
        client.call("kv/compaction", {"revision": latest})
        # A watch resuming before the compacted revision is cancelled by etcd.
        bell = WatchBell(client, client.key("head") + b"/", start_revision=first)
        assert bell.wait_beyond(first, timeout=LONG), "readers are told to look again"
        now = client.put(client.key("head", "x"), b"3")
        assert bell.wait_beyond(now - 1, timeout=LONG), "and the bell still rings for what comes after"
        assert len(c.read()) == 5, "facts are read by key: compaction lost none"
    finally:
        if bell is not None:
            bell.close()
        c.close()
