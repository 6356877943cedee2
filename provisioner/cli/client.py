"""The CLI's way to a running daemon: its REST API, with the standard library only.

Errors become ``ClientError`` with one line: the HTTP status and the API's
own ``error`` text (whatever the server answered, never its JSON as it
came), or why the daemon could not be reached.
"""

from __future__ import annotations

import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from messages.demand import DemandSnapshot, HostEventKind, SupplySnapshot
from provisioner.api.auth import TokensError, check_private
from provisioner.surface.protocol import Steer

if TYPE_CHECKING:
    from provisioner.surface.bulk import Bulk, BulkFilter

PAGE = 1000


class ClientError(Exception):
    """The daemon refused the call or could not be reached."""


def read_token(path: Path) -> str:
    """The bearer token in ``path`` (its only line); the file must be private like the daemon's."""
    try:
        check_private(path)
        token = path.read_text().strip()
    except TokensError as exc:
        raise ClientError(f"--token-file {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ClientError(f"--token-file {path}: cannot read it: {exc}") from None
    if not token or len(token.split()) != 1:
        raise ClientError(f"--token-file {path}: expected one token on one line")
    return token


class Remote:
    def __init__(self, url: str, token: str | None = None, cafile: str | None = None, timeout: float = 30.0):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ClientError(f"--url {url!r}: expected http://HOST:PORT or https://HOST:PORT")
        self.base = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.context = ssl.create_default_context(cafile=cafile) if parts.scheme == "https" else None

    def _call(self, method: str, path: str, body: Any = None, **query: Any) -> Any:
        params = {k: v for k, v in query.items() if v is not None}
        url = self.base + path + (f"?{urllib.parse.urlencode(params)}" if params else "")
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.context) as resp:
                return orjson.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise ClientError(f"{method} {path}: {exc.code} {_said(exc)}") from None
        except urllib.error.URLError as exc:
            raise ClientError(f"cannot reach {self.base}: {exc.reason}") from None
        except (TimeoutError, ConnectionError) as exc:
            raise ClientError(f"cannot reach {self.base}: {exc}") from None
        except orjson.JSONDecodeError:
            raise ClientError(f"{method} {path}: the answer is not JSON; is {self.base} a provisioner?") from None

    # --- the same operations as the direct mode ------------------------------------------

    def page(self, view: str, where: dict[str, Any], after: str | None = None,
             limit: int | None = None) -> tuple[list[dict[str, Any]], str | None]:
        page = self._call("GET", f"/v1/{view}", limit=limit, after=after, **where)
        return page["items"], page["next"]

    def rows(self, view: str, **where: Any) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        after = None
        while True:
            items, after = self.page(view, where, after, PAGE)
            rows += items
            if after is None:
                return rows

    def demand(self) -> dict[str, Any] | None:
        return self._call("GET", "/v1/demand")

    def put_demand(self, snapshot: DemandSnapshot) -> dict[str, Any]:
        return self._call("PUT", "/v1/demand", snapshot.to_dict())

    def host_event(self, name: str, event: HostEventKind, provider: str | None = None) -> dict[str, Any]:
        body = {"event": event, **({"provider": provider} if provider else {})}
        return self._call("POST", f"/v1/hosts/{_seg(name)}/events", body)

    def put_supply(self, view: SupplySnapshot) -> dict[str, Any]:
        return self._call("PUT", "/v1/supply", view.to_dict())

    def steer(self, provider: str, action: Steer, reason: str) -> dict[str, Any]:
        return self._call("POST", f"/v1/providers/{_seg(provider)}/{action}", {"reason": reason})

    def return_instance(self, ident: str, reason: str) -> dict[str, Any]:
        return self._call("POST", f"/v1/instances/{_seg(ident)}/return", {"reason": reason})

    def bulk(self, action: Bulk, f: BulkFilter, reason: str, dry_run: bool) -> dict[str, Any]:
        body = {**f.model_dump(exclude_none=True, exclude_defaults=True), "dry_run": dry_run, "reason": reason}
        return self._call("POST", f"/v1/instances/{action}", body)

    def return_orphan(self, ident: str, reason: str) -> dict[str, Any]:
        return self._call("POST", f"/v1/orphans/{_seg(ident)}/return", {"reason": reason})

    def reload(self) -> dict[str, Any]:
        return self._call("POST", "/v1/reload")

    def audit(self, after: str | None, limit: int) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/audit", after=after, limit=limit)["items"]

    def audit_verify(self) -> dict[str, Any]:
        return self._call("GET", "/v1/audit/verify")

    def close(self) -> None:
        """Nothing held between calls."""


def _seg(value: str) -> str:
    """One path segment; a ``/`` inside is escaped and the API's path parameters take it back."""
    return urllib.parse.quote(value, safe="")


def _said(exc: urllib.error.HTTPError) -> str:
    """What the server said, in one line: the API's ``error``; another server's ``detail`` (a proxy, or an
    API of another version), each problem as ``field: message``; else the status's reason. Never the
    answer's JSON as it came."""
    try:
        doc = orjson.loads(exc.read())
    except (orjson.JSONDecodeError, OSError):
        doc = None
    said = doc.get("error") or _detail(doc.get("detail")) if isinstance(doc, dict) else None
    return " ".join(str(said or exc.reason or "error").split())


def _detail(detail: Any) -> str | None:
    if isinstance(detail, str):
        return detail
    if not isinstance(detail, list) or not detail:
        return None
    parts = []
    for problem in detail:
        if isinstance(problem, dict) and isinstance(problem.get("msg"), str):
            where = ".".join(str(p) for p in problem.get("loc") or ())
            parts.append(f"{where}: {problem['msg']}" if where else problem["msg"])
    if not parts:
        return None
    return parts[0] + (f" ({len(parts) - 1} more)" if len(parts) > 1 else "")
