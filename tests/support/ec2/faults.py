"""An HTTP proxy in front of moto's EC2: it fails chosen calls and makes instance states lag, as AWS does.

moto answers every call at once and changes an instance's state in the same
moment it is asked to, so on its own it cannot show what the provider must
survive on AWS: capacity errors in one zone, throttling, instances that stay
``pending`` and ``shutting-down`` for a while, and ids that EC2 does not show
yet just after a launch. The proxy adds exactly that, at the wire, so the real
``provisioner-ec2`` executable is what is tested:

- ``fail(action, code, status, when=..., times=...)``: answer matching calls
  with an EC2 error document instead of forwarding them;
- ``pending_s``: an instance younger than this (since the proxy saw its
  RunInstances answer) is shown ``pending`` rather than ``running``;
- ``shutting_down_s``: an instance terminated through the proxy less than
  this ago is shown ``shutting-down`` rather than ``terminated``;
- ``hide(ids)`` / ``show(ids)``: a hidden instance is absent from
  DescribeInstances, and TerminateInstances and CreateTags say
  ``InvalidInstanceID.NotFound``, as EC2 does for a moment after a launch.

``calls`` records (action, parameters) of every call, forwarded or failed.
"""

from __future__ import annotations

import http.client
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


def _namespace(root: ET.Element) -> str:
    """``{uri}`` of the document's default namespace (moto and EC2 spell the version URI differently)."""
    return root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""


@dataclass
class Rule:
    action: str
    code: str
    status: int
    when: dict[str, str]
    times: int | None
    message: str

    def matches(self, action: str, params: dict[str, str]) -> bool:
        return action == self.action and all(params.get(k) == v for k, v in self.when.items()) \
            and (self.times is None or self.times > 0)


class FaultProxy:
    def __init__(self, upstream: str, pending_s: float = 0.0, shutting_down_s: float = 0.0) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.pending_s = pending_s
        self.shutting_down_s = shutting_down_s
        self.hidden: set[str] = set()
        self.rules: list[Rule] = []
        self.calls: list[tuple[str, dict[str, str]]] = []
        self.launched: dict[str, float] = {}
        self.terminated: dict[str, float] = {}
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                proxy._serve(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> "FaultProxy":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def fail(self, action: str, code: str, status: int = 500, when: dict[str, str] | None = None,
             times: int | None = None, message: str = "injected by the test proxy") -> None:
        with self.lock:
            self.rules.append(Rule(action, code, status, when or {}, times, message))

    def hide(self, *ids: str) -> None:
        with self.lock:
            self.hidden.update(ids)

    def show(self, *ids: str) -> None:
        with self.lock:
            self.hidden.difference_update(ids)

    def clear(self) -> None:
        with self.lock:
            self.rules.clear()

    def actions(self, name: str) -> list[dict[str, str]]:
        with self.lock:
            return [p for a, p in self.calls if a == name]

    # --- serving -------------------------------------------------------------------

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        body = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        params = {k: v[0] for k, v in parse_qs(body.decode(), keep_blank_values=True).items()}
        action = params.get("Action", "")
        now = time.time()
        with self.lock:
            self.calls.append((action, params))
            rule = next((r for r in self.rules if r.matches(action, params)), None)
            if rule is not None and rule.times is not None:
                rule.times -= 1
            hidden = set(self.hidden)
        if rule is not None:
            return self._error(h, rule.status, rule.code, rule.message)
        asked = [v for k, v in params.items() if k.startswith(("InstanceId.", "ResourceId."))]
        if action in ("TerminateInstances", "CreateTags") and hidden & set(asked):
            unknown = ", ".join(sorted(hidden & set(asked)))
            return self._error(h, 400, "InvalidInstanceID.NotFound", f"The instance IDs '{unknown}' do not exist")
        status, headers, data = self._forward(h, body)
        if status == 200 and action in ("RunInstances", "DescribeInstances", "TerminateInstances"):
            data = self._rewrite(action, asked, data, now)
        h.send_response(status)
        for k, v in headers:
            if k.lower() not in ("content-length", "transfer-encoding", "connection", "server", "date"):
                h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _forward(self, h: BaseHTTPRequestHandler, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(*self.upstream, timeout=30)
        try:
            headers = {k: v for k, v in h.headers.items() if k.lower() not in ("connection", "accept-encoding")}
            conn.request("POST", h.path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.getheaders(), resp.read()
        finally:
            conn.close()

    def _error(self, h: BaseHTTPRequestHandler, status: int, code: str, message: str) -> None:
        data = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
                f"<Message>{message}</Message></Error></Errors><RequestID>proxy</RequestID></Response>").encode()
        h.send_response(status)
        h.send_header("Content-Type", "text/xml")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _rewrite(self, action: str, asked: list[str], data: bytes, now: float) -> bytes:
        root = ET.fromstring(data)
        ns = _namespace(root)
        ET.register_namespace("", ns.strip("{}"))

        def _q(tag: str) -> str:
            return ns + tag

        with self.lock:
            if action == "RunInstances":
                for item in root.iter(_q("item")):
                    iid = item.findtext(_q("instanceId"))
                    if iid and item.find(_q("instanceState")) is not None:
                        self.launched.setdefault(iid, now)
                return data
            if action == "TerminateInstances":
                for iid in asked:
                    self.terminated.setdefault(iid, now)
                for item in root.iter(_q("item")):
                    self._hold(item.find(_q("currentState")), item.findtext(_q("instanceId")) or "", now, ns)
            else:
                for rset in root.iter(_q("reservationSet")):
                    for res in list(rset):
                        instances = res.find(_q("instancesSet"))
                        for item in list(instances) if instances is not None else []:
                            iid = item.findtext(_q("instanceId")) or ""
                            if iid in self.hidden:
                                instances.remove(item)
                                continue
                            self._hold(item.find(_q("instanceState")), iid, now, ns)
                        if instances is not None and len(instances) == 0:
                            rset.remove(res)
        return ET.tostring(root, encoding="utf-8", xml_declaration=True)

    def _hold(self, st: ET.Element | None, iid: str, now: float, ns: str) -> None:
        """Show an instance's state as EC2 would, a few seconds behind moto's."""
        if st is None:
            return
        code, name = st.find(ns + "code"), st.find(ns + "name")
        if code is None or name is None:
            return
        if name.text == "running" and now - self.launched.get(iid, 0.0) < self.pending_s:
            code.text, name.text = "0", "pending"
        elif name.text == "terminated" and now - self.terminated.get(iid, 0.0) < self.shutting_down_s:
            code.text, name.text = "32", "shutting-down"
