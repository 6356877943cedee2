"""The link to an etcd cluster: its v3 JSON gateway, several members, timeouts, TLS.

``etcd://HOST[:PORT][,HOST[:PORT]...][/NAMESPACE][?ca=PATH&cert=PATH&key=PATH&timeout=SECONDS]``

Every call has a deadline (``timeout``, 2 s by default). A member that refuses
the connection, has no leader or does not answer in time is skipped: the call
goes on with the next member while time remains (each member but the last
gets half of what remains, so one silent member cannot eat it all), and the
next call starts with the member that answered last. Every call the controller makes is safe
to repeat (writes are transactions guarded by compares, or plain puts of the
same value), so trying another member after an unknown outcome is harmless.
When no member answers, the call raises ``ControllerUnavailable`` naming the
cluster's location (never a credential: only file paths are in the URL).

Keys are ASCII: names and ids are percent-encoded under ``/NAMESPACE/``, so
one etcd cluster can hold several independent controllers.
"""

from __future__ import annotations

import base64
import math
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Sequence
from urllib.parse import parse_qs, quote, urlsplit

import orjson
import requests
from etcd3gw.client import Etcd3Client
from etcd3gw.exceptions import ConnectionFailedError, ConnectionTimeoutError, Etcd3Exception

from messages.errors import ControllerUnavailable

DEFAULT_PORT = 2379
DEFAULT_NAMESPACE = "provisioner"
DEFAULT_TIMEOUT = 2.0
#: etcd's default ``--max-txn-ops``: the most compares, or success or failure operations, in one transaction.
MAX_TXN_OPS = 128

_ENDPOINT = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9.-]+))(?::(?P<port>\d{1,5}))?$")
#: Key parts that percent-encoding would leave as they are (most ids and names): skip the encoder.
_PLAIN = re.compile(r"^[A-Za-z0-9_.~-]+$")
_NAMESPACE = re.compile(r"^[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*$")


@dataclass(frozen=True)
class EtcdTarget:
    """Where a controller lives in etcd, parsed from its URL."""

    endpoints: tuple[tuple[str, int], ...]
    namespace: str
    timeout: float
    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    @property
    def tls(self) -> bool:
        return bool(self.ca or self.cert)

    @property
    def location(self) -> str:
        hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.endpoints)
        return f"etcd{'s' if self.tls else ''}://{hosts}/{self.namespace}"

    @classmethod
    def from_url(cls, url: str) -> EtcdTarget:
        parts = urlsplit(url)
        # Echo the URL without anything that may be a credential: user info and query.
        shown = f"{parts.scheme}://{','.join(h.rpartition('@')[2] for h in parts.netloc.split(','))}{parts.path}"

        def bad(why: str) -> ValueError:
            return ValueError(f"controller url {shown!r}: {why}")

        if parts.scheme.lower() != "etcd" or parts.fragment:
            raise bad("expected etcd://HOST:PORT[,HOST:PORT...][/NAMESPACE][?ca=&cert=&key=&timeout=]")
        if "@" in parts.netloc:
            raise bad("user names and passwords in the URL are not supported; "
                      "authenticate with a client certificate (cert= and key=)")
        endpoints = []
        for item in parts.netloc.split(","):
            match = _ENDPOINT.match(item.strip())
            if match is None:
                raise bad(f"endpoint {item!r} is not HOST:PORT")
            port = int(match.group("port") or DEFAULT_PORT)
            if not 0 < port < 65536:
                raise bad(f"endpoint {item!r}: port out of range")
            endpoints.append((match.group("v6") or match.group("host"), port))
        namespace = parts.path.strip("/") or DEFAULT_NAMESPACE
        if not _NAMESPACE.match(namespace):
            raise bad(f"namespace {namespace!r}: use letters, digits, '.', '_', '-' and '/'")
        query = parse_qs(parts.query, keep_blank_values=True)
        unknown = set(query) - {"ca", "cert", "key", "timeout"}
        if unknown:
            raise bad(f"unknown parameter {min(unknown)!r}; known: ca, cert, key, timeout")
        single = {}
        for name, values in query.items():
            if len(values) != 1 or not values[0]:
                raise bad(f"parameter {name!r} needs exactly one non-empty value")
            single[name] = values[0]
        if ("cert" in single) != ("key" in single):
            raise bad("a client certificate needs both cert= and key=")
        try:
            timeout = float(single.get("timeout", DEFAULT_TIMEOUT))
        except ValueError:
            raise bad(f"timeout {single['timeout']!r} is not a number of seconds") from None
        if not (0 < timeout < math.inf):
            raise bad(f"timeout {single.get('timeout')!r} must be a positive number of seconds")
        return cls(tuple(endpoints), namespace, timeout, single.get("ca"), single.get("cert"), single.get("key"))


def key_part(part: str) -> bytes:
    """One part of a key, percent-encoded (``key`` joins them with '/')."""
    return (part if _PLAIN.match(part) else quote(part, safe="")).encode("ascii")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(data: str | None) -> bytes:
    return base64.b64decode(data) if data else b""


def prefix_end(prefix: bytes) -> bytes:
    """The first key after every key that starts with ``prefix`` (prefixes here end in '/')."""
    return prefix[:-1] + bytes([prefix[-1] + 1])


@dataclass(frozen=True)
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    lease: int

    @classmethod
    def parse(cls, kv: dict[str, Any]) -> KeyValue:
        # The gateway leaves out fields at their zero value and sends 64-bit numbers as strings.
        return cls(
            key=unb64(kv.get("key")),
            value=unb64(kv.get("value")),
            create_revision=int(kv.get("create_revision", 0)),
            mod_revision=int(kv.get("mod_revision", 0)),
            lease=int(kv.get("lease", 0)),
        )


@dataclass(frozen=True)
class TxnResult:
    succeeded: bool
    revision: int
    #: The kvs each range operation of the branch that ran returned, in order (puts give []).
    ranges: list[list[KeyValue]]


class EtcdClient:
    """Calls on one etcd cluster; safe to share between threads (each thread has its own HTTP sessions)."""

    def __init__(self, target: EtcdTarget) -> None:
        self.target = target
        self.location = target.location
        self.keys = f"/{target.namespace}/".encode()
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._lock = threading.Lock()
        self._preferred = 0
        self._closed = False

    def key(self, *parts: str) -> bytes:
        """``/NAMESPACE/part/part``, each part percent-encoded so keys stay ASCII and '/' stays a separator."""
        return self.keys + b"/".join(map(key_part, parts))

    # --- kv ----------------------------------------------------------------

    def range(self, key: bytes, end: bytes | None = None, limit: int = 0) -> tuple[list[KeyValue], bool]:
        """The kvs in ``[key, end)`` (or ``key`` alone) in key order, and whether more were left out."""
        body: dict[str, Any] = {"key": b64(key)}
        if end is not None:
            body["range_end"] = b64(end)
        if limit:
            body["limit"] = limit
        reply = self.call("kv/range", body)
        return [KeyValue.parse(kv) for kv in reply.get("kvs", ())], bool(reply.get("more"))

    def get(self, key: bytes) -> KeyValue | None:
        kvs, _ = self.range(key)
        return kvs[0] if kvs else None

    def put(self, key: bytes, value: bytes) -> int:
        """Store ``value``; returns the revision of the put."""
        reply = self.call("kv/put", {"key": b64(key), "value": b64(value)})
        return int(reply["header"]["revision"])

    def txn(
        self, compare: list[dict[str, Any]], success: list[dict[str, Any]], failure: Sequence[dict[str, Any]] = ()
    ) -> TxnResult:
        reply = self.call("kv/txn", {"compare": compare, "success": success, "failure": list(failure)})
        ranges = [
            [KeyValue.parse(kv) for kv in r["response_range"].get("kvs", ())]
            for r in reply.get("responses", ())
            if "response_range" in r
        ]
        # A failed transaction has no "succeeded" key at all (false is the zero value).
        return TxnResult(bool(reply.get("succeeded")), int(reply["header"]["revision"]), ranges)

    # --- leases ------------------------------------------------------------

    def grant(self, ttl: int) -> int:
        return int(self.call("lease/grant", {"TTL": ttl, "ID": 0})["ID"])

    def keepalive(self, lease_id: int) -> bool:
        """Refresh an etcd lease; False once it has expired (etcd then leaves out its TTL)."""
        reply = self.call("lease/keepalive", {"ID": lease_id})
        return int(reply.get("result", {}).get("TTL", 0)) > 0

    def revoke(self, lease_id: int) -> None:
        self.call("lease/revoke", {"ID": lease_id})

    # --- transport ---------------------------------------------------------

    @contextmanager
    def until(self, deadline: float) -> Iterator[None]:
        """Calls this thread makes inside the block give up at ``deadline`` (monotonic) at the latest."""
        previous = getattr(self._local, "until", None)
        self._local.until = deadline if previous is None else min(previous, deadline)
        try:
            yield
        finally:
            self._local.until = previous

    def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST to the first member that answers before the deadline."""
        deadline = time.monotonic() + self.target.timeout
        cap = getattr(self._local, "until", None)
        if cap is not None:
            deadline = min(deadline, cap)
        failures: list[str] = []
        members = list(self._members())
        for tried, (index, client) in enumerate(members):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            # A silent member must not eat the whole budget while others are left to try.
            client.timeout = remaining if tried == len(members) - 1 else remaining / 2
            try:
                reply = client.post(client.get_url(path), data=orjson.dumps(body),
                                    headers={"Content-Type": "application/json"})
            except (ConnectionFailedError, ConnectionTimeoutError) as exc:
                failures.append(f"{client.host}:{client.port}: {_reason(exc)}")
            except Etcd3Exception as exc:
                raise ControllerUnavailable(f"controller {self.location}: {path}: {_reason(exc)}") from exc
            except requests.RequestException as exc:
                failures.append(f"{client.host}:{client.port}: {' '.join(str(exc).split())}")
            else:
                self._preferred = index
                return reply
            self._skip(index)
        if not failures:
            failures.append("no time left to ask")
        raise ControllerUnavailable(f"controller {self.location} unreachable: {'; '.join(failures)}")

    def stream(self, path: str, body: dict[str, Any], idle: float) -> requests.Response:
        """Open a streaming POST (a watch) on the first member that accepts it.

        ``idle`` bounds the wait for each chunk, so a silent half-open link ends
        the stream instead of hanging it.
        """
        failures: list[str] = []
        for index, client in self._members():
            try:
                reply = client.session.post(client.get_url(path), data=orjson.dumps(body), stream=True,
                                            timeout=(self.target.timeout, idle))
            except requests.RequestException as exc:
                failures.append(f"{client.host}:{client.port}: {' '.join(str(exc).split())}")
                self._skip(index)
                continue
            if reply.status_code == 200:
                self._preferred = index
                return reply
            failures.append(f"{client.host}:{client.port}: HTTP {reply.status_code}")
            reply.close()
            self._skip(index)
        raise ControllerUnavailable(f"controller {self.location} unreachable: {'; '.join(failures)}")

    def _skip(self, index: int) -> None:
        """A member that failed is not where the next call starts (a call may end before trying others)."""
        if self._preferred == index:
            self._preferred = (index + 1) % len(self.target.endpoints)

    def _members(self) -> Iterator[tuple[int, Etcd3Client]]:
        if self._closed:
            raise ControllerUnavailable(f"controller {self.location} is closed")
        clients: list[Etcd3Client] | None = getattr(self._local, "clients", None)
        if clients is None:
            clients = self._local.clients = [self._client(host, port) for host, port in self.target.endpoints]
            with self._lock:
                self._sessions += [c.session for c in clients]
        start = self._preferred
        for step in range(len(clients)):
            index = (start + step) % len(clients)
            yield index, clients[index]

    def _client(self, host: str, port: int) -> Etcd3Client:
        t = self.target
        # api_path given: etcd 3.4 or newer, and no discovery round trip per member.
        client = Etcd3Client(host, port, protocol="https" if t.tls else "http", ca_cert=t.ca,
                             cert_key=t.key, cert_cert=t.cert, timeout=t.timeout, api_path="/v3/")
        # Only the URL says how to reach etcd: no proxy, CA bundle or .netrc from the environment
        # (REQUESTS_CA_BUNDLE would even override the ca= of the URL).
        client.session.trust_env = False
        return client

    def close(self) -> None:
        """Close every thread's connections; later calls raise ``ControllerUnavailable``."""
        with self._lock:
            self._closed = True
            sessions, self._sessions = self._sessions, []
        for session in sessions:
            session.close()


def _reason(exc: Etcd3Exception) -> str:
    """The gateway's error message (JSON with "message"), else the exception text, on one line."""
    detail = exc.detail_text or ""
    try:
        message = orjson.loads(detail).get("message") or detail
    except (orjson.JSONDecodeError, AttributeError):
        message = detail or str(exc) or type(exc).__name__
    return " ".join(str(message).split())[:300]


def compare(key: bytes, target: str, value: int) -> dict[str, Any]:
    """A transaction compare ``key.<target> == value`` for CREATE or MOD revisions (0 for an absent key)."""
    field = {"CREATE": "create_revision", "MOD": "mod_revision"}[target]
    return {"key": b64(key), "target": target, "result": "EQUAL", field: value}


def absent(key: bytes) -> dict[str, Any]:
    """A transaction compare that ``key`` does not exist: its version is 0.

    Target VERSION, result EQUAL and the value 0 are etcd's defaults, so the compare is the key alone:
    a transaction with one per fact costs etcd (its gateway and its log) half what ``compare(key,
    "CREATE", 0)`` does, which names all three.
    """
    return {"key": b64(key)}


def put_op(key: bytes, value: bytes, lease: int = 0) -> dict[str, Any]:
    op: dict[str, Any] = {"key": b64(key), "value": b64(value)}
    if lease:
        op["lease"] = lease
    return {"request_put": op}


def delete_op(key: bytes) -> dict[str, Any]:
    return {"request_delete_range": {"key": b64(key)}}


def delete_range_op(key: bytes, end: bytes) -> dict[str, Any]:
    """Delete every key in ``[key, end)``."""
    return {"request_delete_range": {"key": b64(key), "range_end": b64(end)}}


def range_op(key: bytes, end: bytes | None = None, limit: int = 0) -> dict[str, Any]:
    op: dict[str, Any] = {"key": b64(key)}
    if end is not None:
        op["range_end"] = b64(end)
    if limit:
        op["limit"] = limit
    return {"request_range": op}
