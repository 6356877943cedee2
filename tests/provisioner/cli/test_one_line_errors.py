"""Every CLI error is one line naming the field and the value: never pydantic's dump, its type tags or its URL.

Arguments the CLI builds models from (a host name, a reason, filters, a
trace's items and times), documents it reads (a demand file, named by file,
line and item id) and what a daemon's REST API answers all end as one line
on stderr and a non-zero exit.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from messages.facts import InstanceSeen, make_fact
from persistence.controller import open_controller
from provisioner.cli.main import main


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "pydantic" not in err and "validation error" not in err and "type=" not in err, err
    assert lines[0].startswith("provisioner: "), err
    return lines[0]


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state.db'}"


def _live(url: str, name: str) -> None:
    c = open_controller(url)
    try:
        c.append([make_fact(InstanceSeen(machine_id="i-1", name=name, state="running"), provider="aws")])
    finally:
        c.close()


@pytest.mark.parametrize("name,said", [
    ("node 1", "host name: not a valid name: 'node 1' (letters, digits, '.', '_', ':', '@', '/' and '-', "
               "starting with a letter or digit)"),
    ("n" * 201, "host name: must be at most 200 characters, got 201 ('nnnn"),
])
def test_host_joined_with_a_name_the_pattern_refuses_is_one_line_naming_it(url, capsys, name, said):
    """A provider may report a host name the host-event pattern refuses; the event is refused in one line
    (it printed pydantic's three lines and its URL)."""
    _live(url, name)
    assert main(["--controller", url, "host", "joined", name]) == 1
    assert _one_line(capsys).startswith(f"provisioner: {said}")
    c = open_controller(url)
    try:
        assert c.read_host_events() == [], "nothing stored"
    finally:
        c.close()


def test_host_joined_with_a_provider_name_the_pattern_refuses_names_the_option(url, capsys):
    assert main(["--controller", url, "host", "idle", "node-1", "--provider", "aws east"]) == 1
    assert _one_line(capsys) == ("provisioner: --provider: not a valid name: 'aws east' (letters, digits, '.', '_', "
                                 "':', '@', '/' and '-', starting with a letter or digit)")


@pytest.mark.parametrize("reason,said", [
    ("x" * 501, "--reason: must be at most 500 characters, got 501 ('xxxx"),
    ("a\x07b", "--reason: not valid: 'a\\x07b' (one line of text, no control characters)"),
])
def test_a_reason_refused_over_rest_is_refused_directly_too_in_one_line(url, capsys, reason, said):
    assert main(["--controller", url, "provider", "pause", "aws", "--reason", reason]) == 1
    assert _one_line(capsys).startswith(f"provisioner: {said}")


@pytest.mark.parametrize("name,text,said", [
    ("demand.yaml", "items:\n  - {id: lic, kind: units, resource: vcs, count: 2}\n"
                    "  - id: gpu\n    kind: hosts\n    count: -1\n",
     "demand.yaml:5: items[1] (id 'gpu').count: must be at least 0, got -1"),
    ("demand.json", '{"items": [\n  {"id": "a", "kind": "units", "resource": "vcs", "count": 1},\n'
                    '  {"id": "b", "kind": "gpus", "count": 1}\n]}\n',
     "demand.json:3: items[1] (id 'b').kind: expected one of 'hosts', 'units', 'bundles', got 'gpus'"),
    ("demand.json", '{"items": [{"id": "b", "kind": "hosts", "count": 1, "select": {"ncpus": ">=many"}}]}',
     "demand.json:1: items[0] (id 'b'): select.ncpus: >= needs a number, got 'many'"),
    ("demand.yaml", "items:\n  - {id: h, kind: hosts, count: 1}\n"
                    "  - {id: j, kind: bundles, count: 2, resources: {ncpus: 1}, exclusiv: true}\n",
     "demand.yaml:3: items[1] (id 'j').exclusiv: unknown field (did you mean 'exclusive'?)"),
    ("demand.yaml", "items:\n  - {id: 'a b', kind: hosts, count: true}\n",
     "demand.yaml:2: items[0] (id 'a b').id: not a valid name: 'a b' (letters, digits, '.', '_', ':', '@', '/' "
     "and '-', starting with a letter or digit) (1 more)"),
])
def test_a_bad_demand_file_names_the_file_line_item_field_and_value(url, tmp_path, capsys, name, text, said):
    f = tmp_path / name
    f.write_text(text)
    open_controller(url).close()
    assert main(["--controller", url, "demand", "put", str(f)]) == 1
    assert _one_line(capsys) == f"provisioner: {tmp_path / said}"
    assert main(["--controller", url, "plan", "--demand", str(f)]) == 1
    assert _one_line(capsys) == f"provisioner: {tmp_path / said}", "plan reads a demand file the same way"


def test_a_bad_supply_view_names_the_host(url, tmp_path, capsys):
    f = tmp_path / "supply.yaml"
    f.write_text("hosts:\n  - {name: node-1, state: idle}\n  - {name: node-2, state: asleep}\n")
    assert main(["--controller", url, "supply", "put", str(f)]) == 1
    assert _one_line(capsys) == (f"provisioner: {f}:3: hosts[1] (name 'node-2').state: expected one of 'idle', "
                                 "'busy', got 'asleep'")


@pytest.mark.parametrize("args,said", [
    (["--start", "yesterday"], "--start: not a time: 'yesterday' (use e.g. 2024-05-06T00:00:00Z)"),
    (["--step", "soon"], "--step: not a duration: 'soon' (use e.g. 90s, 10m, 2h)"),
    (["--hosts", "b b:4"], "--hosts 'b b:4': id: not a valid name: 'b b' (letters, digits, '.', '_', ':', '@', '/' "
                           "and '-', starting with a letter or digit)"),
    (["--hosts", "b:4:1:ncpus>=x"], "--hosts 'b:4:1:ncpus>=x': select.ncpus: >= needs a number, got 'x'"),
    (["--units", "l:bad lic:4"], "--units 'l:bad lic:4': resource: not a valid name: 'bad lic' (letters, digits, "
                                 "'.', '_', ':', '@', '/' and '-', starting with a letter or digit)"),
])
def test_trace_generate_arguments_that_make_no_trace_are_one_line_naming_the_option(tmp_path, capsys, args, said):
    out = tmp_path / "t.jsonl"
    base = ["trace", "generate", "--out", str(out), "--days", "1"]
    assert main(base + (args if "--hosts" in args or "--units" in args else ["--hosts", "b:4", *args])) == 1
    assert _one_line(capsys) == f"provisioner: {said}"
    assert not out.exists(), "no trace written"


@pytest.mark.parametrize("option", ["--since", "--step"])
def test_trace_export_names_the_duration_option(url, tmp_path, capsys, option):
    open_controller(url).close()
    assert main(["--controller", url, "trace", "export", "--out", str(tmp_path / "t.jsonl"), option, "soon"]) == 1
    assert _one_line(capsys) == f"provisioner: {option}: not a duration: 'soon' (use e.g. 90s, 10m, 2h)"


@pytest.mark.parametrize("item,said", [
    ({"select": {"ncpus": ">=many"}}, "items[0]: item 'b': select.ncpus: >= needs a number, got 'many'"),
    ({"template": "big one"}, "items[0] (id 'b').template: not a valid name: 'big one' (letters, digits, '.', '_', "
                              "':', '@', '/' and '-', starting with a letter or digit)"),
])
def test_a_trace_items_bad_shape_names_line_item_field_and_value(tmp_path, capsys, item, said):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"time": 0}\n' + json.dumps({"time": 60, "items": [
        {"id": "b", "kind": "hosts", "count": 1, **item}]}) + "\n")
    example = Path(__file__).resolve().parents[3] / "examples" / "sim.yaml"
    assert main(["sim", "--config", str(example), "--trace", str(trace), "--out", str(tmp_path / "o")]) == 1
    assert _one_line(capsys) == f"provisioner: {trace}:2: {said}"


# --- through a daemon's REST API -----------------------------------------------------------------


class _Api(BaseHTTPRequestHandler):
    """Answers every call with the 422 the test sets; keeps the paths called."""

    answer: bytes = b""
    called: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
        self.called.append(self.path)
        self.send_response(422)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[tuple[str, type[_Api]]]:
    handler = type("Handler", (_Api,), {"called": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.mark.parametrize("answer,said", [
    ({"error": "body.reason: too long\nsee the docs", "fields": [{"field": "body.reason", "message": "too long"}]},
     "POST /v1/providers/aws/pause: 422 body.reason: too long see the docs"),
    ({"detail": [{"loc": ["body", "reason"], "msg": "String should have at most 500 characters",
                  "type": "string_too_long", "input": "x"}]},
     "POST /v1/providers/aws/pause: 422 body.reason: String should have at most 500 characters"),
    ({"detail": "Unprocessable"}, "POST /v1/providers/aws/pause: 422 Unprocessable"),
    ({"something": {"else": 1}}, "POST /v1/providers/aws/pause: 422 Unprocessable Entity"),
])
def test_a_422_from_the_api_is_one_line_not_a_json_dump(api, capsys, answer, said):
    base, handler = api
    handler.answer = json.dumps(answer).encode()
    assert main(["--url", base, "provider", "pause", "aws"]) == 1
    assert _one_line(capsys) == f"provisioner: {said}"


def test_over_rest_a_bad_host_name_is_refused_before_anything_is_sent(api, capsys):
    base, handler = api
    assert main(["--url", base, "host", "joined", "node 1"]) == 1
    assert _one_line(capsys).startswith("provisioner: host name: not a valid name: 'node 1'")
    assert handler.called == []
