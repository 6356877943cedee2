"""A replay checks every stored row, the daemon's own too: one changed after it was written, or one another
writer put in the log, is refused where it does not fit its model, on both backends."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Callable

import orjson
import pytest

from lease.etcd_client import EtcdClient, EtcdTarget
from messages.facts import Fact, InstanceChanged, InstanceSeen, RequestPlanned, make_fact
from persistence.controller import open_controller, sqlite_file
from persistence.replay import replay


def lifecycle(i: int) -> list[Fact]:
    """A host's facts as a daemon writes them: asked for, seen, joined, idle."""
    return [
        make_fact(RequestPlanned(action="request", supply="hosts", template="t", count=1), provider="p",
                  fact_id=f"r{i}"),
        make_fact(InstanceSeen(machine_id=f"m{i}", name=f"n{i}", request_id=f"r{i}", state="running"), provider="p"),
        make_fact(InstanceChanged(kind="instance_joined", machine_id=f"m{i}", state="joined"), provider="p"),
        make_fact(InstanceChanged(kind="instance_idle", machine_id=f"m{i}", state="idle"), provider="p"),
    ]


#: One byte of a stored row changed: its kind is no longer one the model knows.
ONE_BYTE = (b'"kind":"instance_idle"', b'"kind":"instance_idlf"')
#: A row in the log's own shape, from another writer, that the model refuses: a negative count.
FOREIGN = orjson.dumps({"id": "r-foreign", "time": 1.0, "provider": "p", "lease": "", "fence": 0, "v": 1,
                        "payload": {"kind": "request_planned", "action": "request", "supply": "hosts",
                                    "template": "t", "count": -1}})


def sqlite_tamper(url: str, seq: int, last: int) -> None:
    with sqlite3.connect(sqlite_file(url)) as raw:
        stored = raw.execute("SELECT payload FROM facts WHERE seq = ?", (seq,)).fetchone()[0]
        raw.execute("UPDATE facts SET payload = ? WHERE seq = ?", (bytes(stored).replace(*ONE_BYTE), seq))
        raw.execute("INSERT INTO facts (seq, id, time, provider, lease, fence, kind, v, payload)"
                    " VALUES (?, 'r-foreign', 1.0, 'p', '', 0, 'request_planned', 1, ?)", (last + 1, FOREIGN))


def etcd_tamper(url: str, seq: int, last: int) -> None:
    raw = EtcdClient(EtcdTarget.from_url(url))
    try:
        key = raw.key("facts", f"{last:020d}")  # one append: one key holds the batch, under its last seq
        lines = raw.get(key).value.split(b"\n")
        lines[seq - 1] = lines[seq - 1].replace(*ONE_BYTE)
        raw.put(key, b"\n".join(lines))
        raw.put(raw.key("facts", f"{last + 1:020d}"), FOREIGN)
        raw.put(raw.key("head", "facts"), b"%d" % (last + 1))
    finally:
        raw.close()


@pytest.fixture(params=["sqlite", pytest.param("etcd", marks=pytest.mark.slow)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Callable[[str, int, int], None]]:
    if request.param == "sqlite":
        return f"sqlite://{tmp_path / 'state.db'}", sqlite_tamper
    return request.getfixturevalue("etcd_url"), etcd_tamper


def test_a_row_changed_after_it_was_written_or_from_another_writer_is_refused_on_replay(backend, caplog) -> None:
    url, tamper = backend
    c = open_controller(url)
    try:
        written = c.append([f for i in range(2) for f in lifecycle(i)]).accepted
        changed = written[-1]  # m1's idle, as the daemon wrote it
        tamper(url, changed.seq, written[-1].seq)
        caplog.set_level("WARNING")
        p = replay(c)
    finally:
        c.close()
    assert {key: rec.state for key, rec in p.instances.items()} == {
        "p/m0": "idle", "p/m1": "joined"}, "m1's idle did not decode: it was not applied"
    assert set(p.requests) == {"r0", "r1"}, "the foreign row's negative count is refused"
    skipped = [r.getMessage() for r in caplog.records if "does not decode" in r.getMessage()]
    assert [m.split(" that ")[0].split("skipping ")[1] for m in skipped] == [
        f"fact seq {changed.seq}", f"fact seq {changed.seq + 1}"]
