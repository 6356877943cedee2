"""The checks behind a daemon's refusal of a reset controller: its mark, its snapshot, and accepting a reset."""

from __future__ import annotations

from pathlib import Path

import pytest

from messages.facts import ProviderAdmin, make_fact
from persistence.controller import open_controller
from persistence.snapshot import SnapshotStore
from provisioner.daemon.resetguard import ControllerReset, Mark, MarkKeeper, accept, check
from tests.support.daemons import HOSTS_SIM, make_config, sim_provider, wait_until


def facts(n: int, provider: str = "p") -> list:
    return [make_fact(ProviderAdmin(kind="provider_paused"), provider=provider, now=float(i)) for i in range(n)]


def committed(c, n: int, mark: Mark, provider: str = "p") -> None:
    last = c.append(facts(n, provider)).accepted[-1]
    mark.write(last.seq, last.id)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state.db'}"


def fresh(tmp_path: Path, url: str):
    for suffix in ("", "-wal", "-shm"):
        Path(f"{tmp_path / 'state.db'}{suffix}").unlink(missing_ok=True)
    return open_controller(url)


def test_the_mark_follows_the_commits_and_a_lost_one_is_named(tmp_path, url) -> None:
    home = tmp_path / "home"
    c = open_controller(url)
    mark = Mark(home, url)
    committed(c, 3, mark)
    committed(c, 2, mark)
    assert mark.read()[:2] == (5, c.read(after=4)[0].id)
    assert check(c, Mark(home, url), SnapshotStore.for_controller(home, url), url) is None
    c.close()
    c = fresh(tmp_path, url)
    committed(c, 2, Mark(tmp_path / "elsewhere", url))  # another daemon's start on the emptied file
    problem = check(c, Mark(home, url), SnapshotStore.for_controller(home, url), url)
    assert problem is not None and "holds no fact 5" in problem and "its log ends at seq 2" in problem
    assert str(tmp_path / "state.db") in problem, "the controller is named (a file path, or an URL's hosts)"
    c.close()


def test_the_keeper_writes_the_newest_mark_on_its_thread_and_the_last_at_its_stop(tmp_path, url) -> None:
    home = tmp_path / "home"
    c = open_controller(url)
    keeper = MarkKeeper(Mark(home, url))
    keeper.start()
    keeper.committed(c.append(facts(3)).accepted)
    wait_until(lambda: (Mark(home, url).read() or (0,))[0] == 3, timeout=30, what="the mark of seq 3")
    keeper.committed(c.append(facts(2)).accepted)
    keeper.committed([])
    keeper.stop()
    assert Mark(home, url).read()[:2] == (5, c.read(after=4)[0].id), "the last commit's mark, once stopped"
    stale = c.read(after=0)[:1]
    keeper.committed(stale)
    keeper.stop()
    assert Mark(home, url).read()[0] == 5, "an older fact never replaces a newer mark"
    c.close()


def test_another_log_under_the_same_url_is_named(tmp_path, url) -> None:
    home = tmp_path / "home"
    c = open_controller(url)
    committed(c, 4, Mark(home, url))
    c.close()
    c = fresh(tmp_path, url)
    c.append(facts(6, provider="q"))
    problem = check(c, Mark(home, url), SnapshotStore.for_controller(home, url), url)
    assert problem is not None and "holds another fact at seq 4" in problem
    c.close()


def test_a_snapshot_ahead_of_the_log_is_caught_without_a_mark(tmp_path, url) -> None:
    home = tmp_path / "home"
    c = open_controller(url)
    c.append(facts(3))
    store = SnapshotStore.for_controller(home, url)
    store.write(b"{}", seq=9, fact_id="fact-9")
    problem = check(c, Mark(home, url), store, url)
    assert problem is not None and "holds no fact 9" in problem and str(store.path) in problem
    accept(c, Mark(home, url), store, problem)
    assert not store.path.exists(), "the snapshot of the controller as it was is removed"
    assert Mark(home, url).read()[:2] == (3, c.read(after=2)[0].id), "the mark is what the controller holds now"
    assert check(c, Mark(home, url), store, url) is None
    c.close()


def test_a_daemon_refuses_before_starting_anything(tmp_path, url) -> None:
    cfg = make_config(tmp_path, [sim_provider(tmp_path, "hosts", HOSTS_SIM)])
    home = tmp_path / "home"
    c = open_controller(url)
    committed(c, 2, Mark(home, cfg.controller.url))
    c.close()
    c = fresh(tmp_path, url)
    calls: list = []
    from provisioner.daemon.root import Daemon

    daemon = Daemon(cfg, home, controller=c, calls_factory=lambda *a: calls.append(a))
    with pytest.raises(ControllerReset, match="refusing to start: .* --accept-reset-controller"):
        daemon.start()
    assert daemon.journal is None and daemon.leases is None and calls == [] and c.last_seq() == 0
    daemon.stop()
