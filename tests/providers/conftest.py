"""Fixtures for the script runner tests: scripts written into tmp_path, and result collection.

Helpers are handed out as fixtures (``tools``) rather than imported, so these
tests do not depend on how pytest names this directory's modules.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from config.models import ProviderConfig
from messages.scripts import ScriptResult
from providers.runner import ScriptRunner

DATA = Path(__file__).parent / "data"


def data(name: str) -> Any:
    return json.loads((DATA / name).read_text())


class Results:
    """Collects ``on_result(result, tag)`` calls, with the thread each came on."""

    def __init__(self) -> None:
        self.calls: list[tuple[ScriptResult, object, str]] = []
        self._cond = threading.Condition()

    def __call__(self, result: ScriptResult, tag: object) -> None:
        with self._cond:
            self.calls.append((result, tag, threading.current_thread().name))
            self._cond.notify_all()

    def wait(self, n: int, timeout: float = 8.0) -> list[ScriptResult]:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.calls) >= n, timeout):
                raise AssertionError(f"expected {n} results, got {len(self.calls)}")
            return [r for r, _, _ in self.calls]


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state not in ("Z", "X"):
            members.append(int(entry))
    return members


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in ("Z", "X")


def settle(check: Callable[[], bool], within: float = 2.0) -> bool:
    """True once ``check()`` holds; SIGKILLed processes take a moment to disappear from /proc."""
    until = time.monotonic() + within
    while time.monotonic() < until:
        if check():
            return True
        time.sleep(0.01)
    return check()


@pytest.fixture
def results() -> Results:
    return Results()


@pytest.fixture
def script(tmp_path: Path) -> Callable[..., Path]:
    def make(body: str, name: str = "provider", mode: int = 0o755, folder: str = "scripts") -> Path:
        path = tmp_path / folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
        path.chmod(mode)
        return path

    return make


def provider(
    path: Path, *, style: str = "v2", kind: str = "hosts", name: str = "p1", env_file: Path | None = None, **script: Any
) -> ProviderConfig:
    return ProviderConfig.model_validate(
        {"name": name, "kind": kind, "script": {"style": style, "path": str(path), **script}, "env_file": env_file}
    )


@pytest.fixture
def tools() -> SimpleNamespace:
    return SimpleNamespace(data=data, provider=provider, group_members=group_members, alive=alive, settle=settle,
                           left=left)


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    """A folder standing in for ``/dev/shm`` in the runners of ``make_runner``: this test's alone."""
    root = tmp_path / "memory"
    root.mkdir(mode=0o755)
    return root


@pytest.fixture
def inputs(memory: Path) -> Path:
    """Where the runners of ``make_runner`` write their input files: the daemon user's folder in ``memory``
    (each process writes in a folder of its own in there)."""
    return memory / f"provisioner-{os.geteuid()}"


def left(folder: Path) -> list[Path]:
    """The input files left in ``folder`` and the folders in it (the processes' locks aside)."""
    return sorted(p for p in folder.rglob("*") if not p.is_dir() and p.name != ".lock") if folder.exists() else []


@pytest.fixture
def make_runner(tmp_path: Path, results: Results, memory: Path) -> Iterator[Callable[..., ScriptRunner]]:
    runners: list[ScriptRunner] = []

    def make(path: Path, *, home: Path | None = None, grace: float = 0.2, memory: Path | None = memory,
             **kw: Any) -> ScriptRunner:
        runner = ScriptRunner(provider(path, **kw), tmp_path / "work", results, home, kill_grace=grace,
                              memory=memory)
        runners.append(runner)
        return runner

    yield make
    for runner in runners:
        runner.stop(wait=3.0)
