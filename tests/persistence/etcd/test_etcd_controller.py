"""What the etcd backend adds to the contract: real-time leases, members, limits, concurrency."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from lease.etcd_client import MAX_TXN_OPS, EtcdClient, EtcdTarget, absent, delete_op
from messages.errors import ControllerUnavailable
from persistence.controller import open_controller
from persistence.port import Cursor
from tests.support.controllers import usage
from tests.support.daemons import free_port, wait_until

pytestmark = pytest.mark.slow

NAME = "provider:aws-east"


def test_unreachable_cluster_raises_naming_every_member_within_the_timeout() -> None:
    dead = [free_port(), free_port()]
    c = open_controller(f"etcd://127.0.0.1:{dead[0]},127.0.0.1:{dead[1]}/ns?timeout=0.5")
    try:
        started = time.monotonic()
        for call in (c.last_seq, lambda: c.leases.acquire(NAME, "a", ttl=5), lambda: c.append([usage(1)])):
            with pytest.raises(ControllerUnavailable) as err:
                call()
            assert f"etcd://127.0.0.1:{dead[0]},127.0.0.1:{dead[1]}/ns" in str(err.value)
            assert f"127.0.0.1:{dead[1]}:" in str(err.value), "the reason names each member tried"
        assert time.monotonic() - started < 10
    finally:
        c.close()


def test_a_dead_member_is_skipped(etcd_url: str) -> None:
    c = open_controller(etcd_url.replace("etcd://", f"etcd://127.0.0.1:{free_port()},"))
    try:
        assert c.append([usage(1)]).accepted
        assert c.last_seq() == 1
    finally:
        c.close()


def test_a_holder_that_stops_renewing_loses_its_keys_by_etcd_time(etcd_url: str) -> None:
    """The etcd lease, not only the record's clock, ends the grant of a holder that went silent."""
    silent, standby = open_controller(etcd_url), open_controller(etcd_url)
    try:
        held = silent.leases.acquire(NAME, "a", ttl=2)
        assert held is not None
        assert silent.append([usage(1, lease=held)]).refused == []
        assert standby.leases.acquire(NAME, "b", ttl=2) is None
        taken = wait_until(lambda: standby.leases.acquire(NAME, "b", ttl=2), timeout=5, what="the standby's grant")
        assert taken.fence > held.fence
        [refused] = silent.append([usage(2, lease=held)]).refused
        assert str(taken.fence) in refused.reason
        assert silent.leases.renew(held, ttl=2) is None
    finally:
        silent.close()
        standby.close()


def test_renewals_keep_the_instance_lease_alive_past_its_ttl(etcd_url: str) -> None:
    holder, other = open_controller(etcd_url), open_controller(etcd_url)
    try:
        lease = holder.leases.acquire(NAME, "a", ttl=2)
        assert lease is not None
        deadline = time.monotonic() + 3.5
        while time.monotonic() < deadline:
            time.sleep(0.5)
            lease = holder.leases.renew(lease, ttl=2)
            assert lease is not None
            assert other.leases.acquire(NAME, "b", ttl=2) is None
        assert other.leases.get(NAME) == lease
    finally:
        holder.close()
        other.close()


def test_closing_a_holder_frees_its_roles_at_once(etcd_url: str) -> None:
    first, second = open_controller(etcd_url), open_controller(etcd_url)
    try:
        held = first.leases.acquire(NAME, "a", ttl=30)
        assert held is not None
        first.close()
        assert second.leases.get(NAME) is None
        taken = second.leases.acquire(NAME, "b", ttl=30)
        assert taken is not None and taken.fence > held.fence
    finally:
        second.close()


def test_a_batch_naming_more_leases_than_one_transaction_holds_is_split(etcd_url: str) -> None:
    c = open_controller(etcd_url)
    try:
        leases = [c.leases.acquire(f"provider:p{i}", "a", ttl=30) for i in range(MAX_TXN_OPS // 2)]
        assert all(leases)
        facts = [usage(i * 2 + j, lease=lease) for i, lease in enumerate(leases) for j in range(2)]
        result = c.append(facts)
        assert result.refused == []
        assert [f.id for f in c.read()] == [f.id for f in facts]
    finally:
        c.close()


def test_small_reads_fetch_about_the_keys_they_need_whether_keys_hold_batches_or_single_facts(
        etcd_url: str) -> None:
    c = open_controller(etcd_url)
    fetched: list[int] = []  # facts in the keys each range returned
    real_range = c._client.range

    def counting_range(*args, **kwargs):
        kvs, more = real_range(*args, **kwargs)
        fetched.append(sum(kv.value.count(b"\n") + 1 for kv in kvs))
        return kvs, more

    c._client.range = counting_range
    try:
        batches = [c.append([usage(b * 100 + i) for i in range(100)]).accepted for b in range(20)]
        singles = [c.append([usage(5_000 + i)]).accepted[0] for i in range(30)]
        written = [f for batch in batches for f in batch] + singles
        got, seq = [], 0
        while True:
            page = c.read(after=seq, limit=50)
            got += page
            if len(page) < 50:
                break
            seq = page[-1].seq
        assert got == written
        # A fixed range of 256 keys fetched up to 25,600 facts for each read of 50 (43,230 in all).
        assert sum(fetched) < 5 * len(written), fetched
    finally:
        c.close()


def test_concurrent_writers_get_distinct_consecutive_seqs_in_commit_order(etcd_url: str) -> None:
    writers = [open_controller(etcd_url) for _ in range(3)]
    accepted: list[list] = [[] for _ in writers]

    def write(i: int) -> None:
        for n in range(20):
            accepted[i] += writers[i].append([usage(i * 1000 + n * 3 + k) for k in range(3)]).accepted

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(writers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        seqs = sorted(f.seq for batch in accepted for f in batch)
        assert seqs == list(range(1, 181))
        for batch in accepted:
            assert [f.seq for f in batch] == sorted(f.seq for f in batch), "each writer's facts in its order"
        assert [f.seq for f in writers[0].read()] == seqs
    finally:
        for w in writers:
            w.close()


def test_a_stored_fact_that_does_not_decode_is_skipped_and_passed(etcd_url: str, caplog) -> None:
    c = open_controller(etcd_url)
    try:
        first = c.append([usage(1), usage(2)]).accepted
        raw = EtcdClient(EtcdTarget.from_url(etcd_url))
        key = raw.key("facts", f"{first[-1].seq:020d}")
        lines = raw.get(key).value.split(b"\n")
        raw.put(key, b"\n".join([lines[0], b'{"written by": "a newer schema"}']))
        later = c.append([usage(3)]).accepted
        assert c.read() == [first[0], later[0]]
        got = c.changes(Cursor(), timeout=0)
        assert got.facts == [first[0], later[0]] and got.cursor.facts == later[0].seq
        assert f"fact seq {first[1].seq} that does not decode" in caplog.text
    finally:
        c.close()


def test_a_renewal_gives_up_when_its_grant_expires_however_long_the_timeout(own_cluster) -> None:
    cluster = own_cluster()
    member = cluster.members[0]
    c = open_controller(cluster.url("frozen") + "?timeout=60")
    try:
        lease = c.leases.acquire(NAME, "a", ttl=2)
        assert lease is not None
        member.proc.send_signal(signal.SIGSTOP)  # etcd answers nothing, refuses nothing
        started = time.monotonic()
        with pytest.raises(ControllerUnavailable):
            c.leases.renew(lease, ttl=2)
        assert time.monotonic() - started < 10, "the holder hears of it by the grant's expiry, not the 60 s timeout"
        assert c.leases.renew(lease, ttl=2) is None, "past its expiry, without asking"
    finally:
        member.proc.send_signal(signal.SIGCONT)
        c.close()


def test_an_absent_compare_holds_until_the_key_is_put_and_after_it_is_deleted(etcd_url: str) -> None:
    client = EtcdClient(EtcdTarget.from_url(etcd_url))
    try:
        key = client.key("ids", "usage-1")
        assert client.txn([absent(key)], []).succeeded
        client.put(key, b"1")
        assert not client.txn([absent(key)], []).succeeded
        client.put(key, b"2")  # a later version: still there
        assert not client.txn([absent(key)], []).succeeded
        client.txn([], [delete_op(key)])
        assert client.txn([absent(key)], []).succeeded
    finally:
        client.close()
