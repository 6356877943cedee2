"""``lmutil lmstat -a`` output, as text, turned into what the license server says: a pure function.

What it reads, in the order lmstat prints it::

    License server status: 27000@lic1,27000@lic2,27000@lic3
        lic1: license server UP (MASTER) v11.19.5
        lic3: Cannot read data from license server system. (-16,287)
    Vendor daemon status (on lic1):
         snpslmd: UP v11.19.5
    Feature usage info:
    Users of VCSRuntime_Net:  (Total of 40 licenses issued;  Total of 9 licenses in use)
      "VCSRuntime_Net" v2024.03, vendor: snpslmd, expiry: 31-dec-2026
      floating license
        alice cn001 cn001 (v2024.03) (lic1/27000 1201), start Mon 3/3 9:15, 4 licenses
        bob ws12 :0.0 (v2024.03) (lic1/27000 902), start Mon 3/3 8:02 (linger: 3600)
        2 RESERVATIONs for HOST ws40 (lic1/27000)
        carol cn007 /dev/pts/2 (v2024.03) (lic1/27000 1404) queued for 2 licenses
    Users of Compiler:  (Uncounted, node-locked)
    Users of Formality:  (Error: 2 licenses, unsupported by licensed server)

and, when nothing answers, ``Error getting status: Cannot connect to license
server system. (-15,570:111 "Connection refused")``.

Lines it does not know are skipped: vendors add their own (``vendor_string:``,
borrow notes) and a parser that failed on them would stop lending over a
cosmetic change. A user line is read from its right end, where lmstat's format
is fixed, so a user name with spaces (Windows accounts) still leaves the host
and display in place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

_GLOBAL_ERROR = re.compile(r"^\s*Error getting status:\s*(?P<msg>.*)$")
_SERVER_STATUS = re.compile(r"^\s*License server status:\s*(?P<spec>\S+)")
_SERVER_UP = re.compile(r"^\s*(?P<host>\S+): license server UP(?P<master> \(MASTER\))?(?:\s+(?P<version>v\S+))?")
_SERVER_DOWN = re.compile(r"^\s*(?P<host>[^\s:]+): (?P<msg>(?:Cannot|License server machine is down|lmgrd is not).*)$")
_VENDOR_SECTION = re.compile(r"^\s*Vendor daemon status \(on (?P<host>[^)]+)\):")
_VENDOR = re.compile(r"^\s*(?P<name>[^\s:]+): (?P<msg>.*)$")
_FEATURES_SECTION = re.compile(r"^\s*Feature usage info:")
_USERS_OF = re.compile(r"^\s*Users of (?P<name>.+?):\s+\((?P<body>.*)\)\s*$")
_COUNTED = re.compile(r"Total of (?P<issued>\d+) licenses? issued;\s+Total of (?P<in_use>\d+) licenses? in use")
_UNCOUNTED = re.compile(r"^\s*Uncounted")
_DESCRIPTOR = re.compile(r'^\s+"(?P<name>[^"]+)" (?P<version>\S+?),\s+vendor: (?P<vendor>[^,\s]+)')
#: ``WHO (vVERSION) (SERVER/PORT HANDLE)REST``; WHO is ``user host display``, the user maybe with spaces.
_CHECKOUT = re.compile(
    r"^\s+(?P<who>\S.*?)\s+\((?P<version>v[^()\s]*)\)\s+"
    r"\((?P<server>[^/()\s]+)/(?P<port>\d+)(?:\s+(?P<handle>\d+))?\)(?P<rest>.*)$"
)
_RESERVATION = re.compile(
    r"^\s+(?P<count>\d+)\s+RESERVATIONs?\s+for\s+(?P<kind>\S+)\s+(?P<owner>.+?)\s+"
    r"\((?P<server>[^/()\s]+)/(?P<port>\d+)\)\s*$"
)
_START = re.compile(r"start (?P<start>\w{3} \d{1,2}/\d{1,2} \d{1,2}:\d{2})")
_COUNT = re.compile(r",\s*(?P<count>\d+) licenses?\b")
_LINGER = re.compile(r"\(linger:\s*(?P<numbers>\d+(?:\s*/\s*\d+)*)\s*\)")
_QUEUED = re.compile(r"\bqueued for (?P<count>\d+) licenses?\b")


@dataclass(frozen=True)
class Server:
    """One license server of the spec (three for a triad), as lmstat saw it."""

    host: str
    up: bool
    master: bool = False
    version: str = ""
    message: str = ""


@dataclass(frozen=True)
class Vendor:
    name: str
    up: bool
    message: str = ""


@dataclass(frozen=True)
class Checkout:
    """Tokens held by one client process: a running job, a lingering or a borrowed license."""

    user: str
    host: str
    display: str
    version: str
    server: str
    port: int
    handle: int | None
    #: As printed (``Mon 3/3 9:15``): lmstat gives no year, and nothing here needs one.
    start: str
    count: int = 1
    #: ``(linger: N)`` or ``(linger: N / M)`` as printed, in seconds. A license that lingers is held
    #: after its process ended; FlexNet shows a borrowed license this way, held by the borrowing host
    #: for the borrow period.
    linger: tuple[int, ...] = ()


@dataclass(frozen=True)
class Reservation:
    """Tokens an options file sets aside (``2 RESERVATIONs for HOST ws40``): in use, but by nobody's job."""

    count: int
    kind: str
    owner: str
    server: str
    port: int


@dataclass(frozen=True)
class Queued:
    """A client waiting for tokens: it holds none, so nothing counts it."""

    user: str
    host: str
    display: str
    version: str
    count: int


@dataclass(frozen=True)
class Feature:
    name: str
    #: The vendor daemon serving it: from its descriptor line, else the vendor section it is listed in.
    vendor: str | None
    state: Literal["counted", "uncounted", "error"]
    issued: int = 0
    in_use: int = 0
    #: What lmstat said instead of the totals, for an uncounted or failing feature.
    message: str = ""
    checkouts: tuple[Checkout, ...] = ()
    reservations: tuple[Reservation, ...] = ()
    queued: tuple[Queued, ...] = ()


@dataclass(frozen=True)
class Lmstat:
    #: ``Error getting status: ...`` when lmstat could not get any status at all.
    error: str | None = None
    #: The spec after ``License server status:`` (``27000@lic1`` or a triad's three).
    spec: str = ""
    servers: tuple[Server, ...] = ()
    vendors: tuple[Vendor, ...] = ()
    features: tuple[Feature, ...] = ()

    @property
    def reachable(self) -> bool:
        """Whether the license server system answered: one server, or two of a triad's three (its quorum)."""
        if not self.servers:
            return self.error is None and any(f.state == "counted" for f in self.features)
        members = max(len(self.servers), len([s for s in self.spec.split(",") if s]))
        up = sum(1 for s in self.servers if s.up)
        return up >= (2 if members >= 3 else 1)

    def vendor(self, name: str) -> Vendor | None:
        for v in self.vendors:
            if v.name == name:
                return v
        return None

    def find(self, name: str, vendor: str | None = None) -> list[Feature]:
        return [f for f in self.features if f.name == name and (vendor is None or f.vendor == vendor)]


@dataclass
class _FeatureDraft:
    name: str
    vendor: str | None
    state: Literal["counted", "uncounted", "error"]
    issued: int = 0
    in_use: int = 0
    message: str = ""
    checkouts: list[Checkout] = field(default_factory=list)
    reservations: list[Reservation] = field(default_factory=list)
    queued: list[Queued] = field(default_factory=list)

    def freeze(self) -> Feature:
        return Feature(self.name, self.vendor, self.state, self.issued, self.in_use, self.message,
                       tuple(self.checkouts), tuple(self.reservations), tuple(self.queued))


def parse(text: str) -> Lmstat:
    error: str | None = None
    spec = ""
    servers: list[Server] = []
    vendors: dict[str, Vendor] = {}
    features: list[_FeatureDraft] = []
    section = "head"
    vendor: str | None = None
    current: _FeatureDraft | None = None

    for line in text.splitlines():
        if not line.strip():
            continue
        if m := _GLOBAL_ERROR.match(line):
            error = m["msg"].strip()
            continue
        if m := _SERVER_STATUS.match(line):
            spec, section, current = m["spec"], "servers", None
            continue
        if _VENDOR_SECTION.match(line):
            section, current = "vendors", None
            continue
        if _FEATURES_SECTION.match(line):
            section, current = "features", None
            continue
        if m := _USERS_OF.match(line):
            section = "features"
            current = _feature(m["name"].strip(), vendor, m["body"].strip())
            features.append(current)
            continue
        if section == "servers":
            if m := _SERVER_UP.match(line):
                servers.append(Server(m["host"], True, bool(m["master"]), m["version"] or ""))
            elif m := _SERVER_DOWN.match(line):
                servers.append(Server(m["host"], False, message=m["msg"].strip()))
            continue
        if section == "vendors":
            if m := _VENDOR.match(line):
                msg = m["msg"].strip()
                vendor = m["name"]
                vendors[vendor] = Vendor(vendor, msg.startswith("UP"), "" if msg.startswith("UP") else msg)
            continue
        if current is None:
            continue
        if m := _DESCRIPTOR.match(line):
            current.vendor = m["vendor"]
        elif m := _RESERVATION.match(line):
            current.reservations.append(
                Reservation(int(m["count"]), m["kind"], m["owner"], m["server"], int(m["port"])))
        elif m := _CHECKOUT.match(line):
            _holder(current, m)
    return Lmstat(error, spec, tuple(servers), tuple(vendors.values()), tuple(f.freeze() for f in features))


def _feature(name: str, vendor: str | None, body: str) -> _FeatureDraft:
    if m := _COUNTED.search(body):
        return _FeatureDraft(name, vendor, "counted", int(m["issued"]), int(m["in_use"]))
    if _UNCOUNTED.match(body):
        return _FeatureDraft(name, vendor, "uncounted", message=body)
    return _FeatureDraft(name, vendor, "error", message=body)


def _holder(current: _FeatureDraft, m: re.Match[str]) -> None:
    """A checkout, or a queued request: the same columns, then ``, start ...`` or ``queued for N``."""
    who = m["who"].rsplit(None, 2)
    if len(who) == 3:
        user, host, display = who
    elif len(who) == 2:
        (user, host), display = who, ""
    else:
        return
    rest = m["rest"]
    if q := _QUEUED.search(rest):
        current.queued.append(Queued(user, host, display, m["version"], int(q["count"])))
        return
    start = _START.search(rest)
    count = _COUNT.search(rest)
    linger = _LINGER.search(rest)
    current.checkouts.append(Checkout(
        user=user, host=host, display=display, version=m["version"], server=m["server"], port=int(m["port"]),
        handle=int(m["handle"]) if m["handle"] else None, start=start["start"] if start else "",
        count=int(count["count"]) if count else 1,
        linger=tuple(int(n) for n in re.findall(r"\d+", linger["numbers"])) if linger else (),
    ))
