"""The provider's side of protocol v1 (``providers.serving``), in process: hello, pings, calls on threads."""

from __future__ import annotations

import io
import json
import threading
import time
from typing import Any

from providers.serving import Server


class Out(io.BytesIO):
    """stdout as the daemon reads it: whole lines, written from several threads."""

    def lines(self, n: int, within: float = 3.0) -> list[dict[str, Any]]:
        until = time.monotonic() + within
        while time.monotonic() < until:
            rows = [json.loads(line) for line in self.getvalue().splitlines()]
            if len(rows) >= n:
                return rows
            time.sleep(0.01)
        raise AssertionError(f"expected {n} lines, got {self.getvalue()!r}")


def serve(calls: list[Any], handle: Any, actions=("status", "request")) -> tuple[list[dict[str, Any]], list[str]]:
    stdin = io.BytesIO(b"".join((c if isinstance(c, bytes) else json.dumps(c).encode()) + b"\n" for c in calls))
    out, said = Out(), []
    assert Server(handle, actions, stdin, out, said.append).run() == 0
    return out, said


def test_hello_first_then_pings_and_calls_answered_by_id() -> None:
    seen = []

    def handle(action: str, doc: dict, deadline: float | None) -> dict:
        seen.append((action, doc, deadline))
        return {"exit": 0, "output": {"requests": []}}

    out, _ = serve([{"id": "p-1", "action": "ping"},
                    {"id": "c-2", "action": "status", "input": {"requests": []}, "deadline": 1767225600.0}], handle)
    hello, pong, answer = out.lines(3)
    assert hello == {"hello": {"protocol": 1, "actions": ["status", "request"]}}
    assert pong == {"id": "p-1", "exit": 0, "output": {}}
    assert answer == {"id": "c-2", "exit": 0, "output": {"requests": []}}
    assert seen == [("status", {"requests": []}, 1767225600.0)]


def test_calls_run_at_once_so_answers_come_as_they_finish_and_pings_are_not_held_up() -> None:
    gate = threading.Event()

    def handle(action: str, doc: dict, deadline: float | None) -> dict:
        if doc.get("slow"):
            gate.wait(3)
        return {"exit": 0, "output": {"slow": bool(doc.get("slow"))}}

    out, _ = serve([{"id": "c-1", "action": "status", "input": {"slow": True}},
                    {"id": "c-2", "action": "status", "input": {}},
                    {"id": "p-3", "action": "ping"}], handle)
    assert {row["id"] for row in out.lines(3)[1:]} == {"c-2", "p-3"}  # c-1 still runs
    gate.set()
    assert out.lines(4)[3]["id"] == "c-1"


def test_what_it_cannot_serve_is_answered_and_a_handler_bug_fails_only_its_call() -> None:
    def handle(action: str, doc: dict, deadline: float | None) -> dict:
        raise KeyError("oops")

    out, said = serve([b"not json", {"action": "status"}, {"id": "c-1", "action": "usage", "input": {}},
                       {"id": "c-2", "action": "status", "input": "x"},
                       {"id": "c-3", "action": "status", "input": {}}], handle)
    rows = {row["id"]: row for row in out.lines(4)[1:]}
    assert rows["c-1"] == {"id": "c-1", "exit": 64, "message": "no such action here: 'usage'"}
    assert rows["c-2"] == {"id": "c-2", "exit": 64, "message": "the call's input is not an object"}
    assert rows["c-3"] == {"id": "c-3", "exit": 1, "message": "status: KeyError"}
    assert said[:2] == ["a line from the daemon that is not JSON ignored: b'not json'",
                        "a line from the daemon without an id ignored"]
    assert any("KeyError: 'oops'" in line for line in said)
