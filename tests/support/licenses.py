"""Real daemons lending license tokens through ``provisioner-flexlm``, against a fake license server.

The license server is a fake ``lmutil`` that prints what a FlexNet server
prints for ``lmstat -a`` (``lmstat_text``); a drill changes who holds tokens
by writing that text again (``LicenseServer.use``). Each cluster
(``LicenseSite``) has its own controller, its own daemons and its own
settings file; what clusters share is the license server and the pool
ledger, which the drills read directly (``ledger_held``) to judge the
daemons by what they actually borrowed.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from persistence.controller import open_controller
from tests.support.drills import SCRIPT_TIMEOUT, Cluster, free_port

FLEXLM = Path(sys.executable).parent / "provisioner-flexlm"
FEATURE = "VCSRuntime_Net"

#: ``lmutil lmstat -a -c SPEC``: logs its arguments and prints what the drill last said.
FAKE_LMUTIL = """#!/bin/sh
echo "$*" >> "{log}"
[ "$1" = lmstat ] || exit 2
cat "{output}"
"""

_HEADER = """lmutil - Copyright (c) 1989-2023 Flexera. All Rights Reserved.
Flexible License Manager status on Mon 3/3/2025 10:05

[Detecting lmgrd processes...]
License server status: 27000@lic1
    License file(s) on lic1: /opt/flexlm/licenses/eda.dat:

      lic1: license server UP (MASTER) v11.19.5

Vendor daemon status (on lic1):

   snpslmd: UP v11.19.5
Feature usage info:

"""

_OTHER_VENDOR = """
Users of VCS_Compiler_Net:  (Uncounted, node-locked)

Vendor daemon status (on lic1):

    cdslmd: UP v11.19.5
Feature usage info:

Users of Xcelium_Single_Core:  (Total of 20 licenses issued;  Total of 3 licenses in use)

  "Xcelium_Single_Core" v23.09, vendor: cdslmd, expiry: 30-jun-2026
  floating license

    John Smith ws-js WS-JS (v23.09) (lic1/27000 331), start Mon 3/3 7:55, 3 licenses
"""


def lmstat_text(holders: dict[str, int], issued: int = 60) -> str:
    """``lmstat -a`` of a server issuing ``issued`` tokens of the feature, ``holders`` (host: tokens) holding
    some, and beside them what every real server shows: a desktop whose license lingers, a reservation for
    a workstation, a queued request (which holds nothing), and a second vendor daemon's features."""
    lines = []
    for i, (host, n) in enumerate(sorted(holders.items())):
        if n > 0:
            many = f", {n} licenses" if n > 1 else ""
            lines.append(f"    job{i} {host} {host} (v2024.03) (lic1/27000 {1201 + i}), start Mon 3/3 9:{15 + i}{many}")
    # Outside every cluster: ws12's 1 lingering token and 2 reserved for ws40.
    lines.append("    bob ws12 :0.0 (v2024.03) (lic1/27000 902), start Mon 3/3 8:02 (linger: 3600)")
    lines.append("    2 RESERVATIONs for HOST ws40 (lic1/27000)")
    lines.append("    carol cn099 /dev/pts/2 (v2024.03) (lic1/27000 1404) queued for 2 licenses")
    in_use = sum(holders.values()) + 3
    return (_HEADER
            + f"Users of {FEATURE}:  (Total of {issued} licenses issued;  Total of {in_use} licenses in use)\n\n"
            + f'  "{FEATURE}" v2024.03, vendor: snpslmd, expiry: 31-dec-2026\n'
            + "  vendor_string: ^1\n  floating license\n\n"
            + "\n".join(lines) + "\n" + _OTHER_VENDOR)


class LicenseServer:
    """The fake license server every cluster's provider asks: one ``lmutil`` and the text it prints."""

    def __init__(self, root: Path, issued: int = 60) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.issued = issued
        self.output = root / "lmstat.txt"
        self.lmutil = root / "lmutil"
        self.lmutil.write_text(FAKE_LMUTIL.format(log=root / "lmutil.log", output=self.output))
        self.lmutil.chmod(0o755)
        self.holders: dict[str, int] = {}
        self.use()

    def use(self, **holders: int) -> None:
        """Who holds tokens now, by host (``cn001=4``); hosts not named hold none. Written whole, at once."""
        self.holders = {h.replace("_", "-"): n for h, n in holders.items()}
        tmp = self.output.with_suffix(".tmp")
        tmp.write_text(lmstat_text(self.holders, self.issued))
        tmp.replace(self.output)


class LicenseSite(Cluster):
    """One cluster: its controller, its daemons, and the units provider ``lic`` lending ``vcs``.

    Daemons are started as the failover drills start them (``Cluster.start``):
    real ``provisioner run`` processes whose config this class writes. Every
    daemon runs ``provisioner-flexlm`` through a wrapper that logs
    ``INSTANCE ACTION TOKEN`` when a call starts and ``... exit CODE`` when it
    ends, so a drill can tell which daemon asked what, and when it was answered.
    """

    def __init__(self, tmp: Path, server: LicenseServer, ledger: str, name: str = "site-a",
                 hosts: tuple[str, ...] = ("cn*",), base: int = 2, pool: int = 10, min_hold: float = 0.0,
                 ttl: float = 2.0, **policy: Any) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        self.tmp = tmp
        self.url = f"sqlite:///{tmp / 'state.db'}"
        self.ttl = ttl
        self.name = name
        self.base = base
        # Usage is read every poll; each read is one process and one lmstat, so polls are not too tight.
        self.policy = {"poll_every": "0.5s", "plan_every": "0.2s", "idle_time": "1s", "join_grace": "10m",
                       "cooldown": "1s", "backoff_max": "1s", **policy}
        self.settings_file = tmp / "flexlm.yaml"
        self.settings_file.write_text(yaml.safe_dump({
            "lmutil": str(server.lmutil), "server": "27000@lic1", "cluster": name, "hosts": list(hosts),
            "ledger": ledger,
            "features": [{"feature": FEATURE, "resource": "vcs", "pool": pool, "step": 1, "min_hold": min_hold}],
        }))
        self.extra_env: dict[str, dict[str, str]] = {}
        self.c = open_controller(self.url)
        self.procs = []

    def provider(self, name: str, caller: str) -> dict:
        wrapper = self.tmp / f"run-{caller}"
        log = self.tmp / "calls.log"
        wrapper.write_text(
            "#!/bin/sh\n"
            f'echo "{caller} $1 ${{PROVISIONER_TOKEN:--}}" >> "{log}"\n'
            # A drill may slow one action down (in the daemon's env_file), to act while it is under way.
            '[ "$1" = "$DRILL_SLOW_ACTION" ] && sleep "$DRILL_SLOW_SECONDS"\n'
            f'"{FLEXLM}" "$@"\n'
            "rc=$?\n"
            f'echo "{caller} $1 ${{PROVISIONER_TOKEN:--}} exit $rc" >> "{log}"\n'
            "exit $rc\n"
        )
        wrapper.chmod(0o755)
        env = self.tmp / f"{caller}.env"
        extra = "".join(f"{k}={v}\n" for k, v in self.extra_env.get(caller, {}).items())
        env.write_text(f"FLEXLM_PROVIDER_CONFIG={self.settings_file}\n{extra}")
        env.chmod(0o600)
        return {"name": name, "kind": "units", "env_file": str(env),
                "script": {"style": "v2", "path": str(wrapper), "timeout": f"{SCRIPT_TIMEOUT}s"}}

    def config(self, instance: str) -> Path:
        cfg = {
            "instance": {"id": instance, "serves": ["lic"], "planner": True},
            "controller": {"url": self.url},
            "api": {"listen": f"127.0.0.1:{free_port()}"},
            "lease": {"ttl": f"{self.ttl}s", "renew_every": f"{min(self.ttl / 4, 1.0)}s"},
            "policy": self.policy,
            "providers": [self.provider("lic", instance)],
            "resources": [{"name": "vcs", "elastic": True, "base": self.base, "provider": "lic"}],
            "home": str(self.tmp / f"home-{instance}"),
        }
        path = self.tmp / f"{instance}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    # --- what the world looks like ----------------------------------------------

    def calls(self, action: str | None = None,  # type: ignore[override]
              ended: bool = False) -> list[tuple[str, str, str]]:
        """(instance, action, token) of provider calls as they started (``ended``: as they ended), in order;
        the token is ``-`` for calls that carry none."""
        return [(r[0], r[1], r[2]) for r in self._log() if (len(r) == 5) == ended and action in (None, r[1])]

    def exits(self, action: str) -> list[tuple[str, str, int]]:
        """(instance, token, exit code) of the calls of ``action`` that ended, in order."""
        return [(r[0], r[2], int(r[4])) for r in self._log() if len(r) == 5 and r[1] == action]

    def _log(self) -> list[list[str]]:
        log = self.tmp / "calls.log"
        return [line.split() for line in log.read_text().splitlines()] if log.exists() else []

    def described(self) -> bool:
        """Whether the provider has described itself to the daemon (its pools, step and minimum hold)."""
        rec = self.state().providers.get("lic")
        return rec is not None and rec.description is not None

    def tails(self, lines: int = 80) -> str:
        return f"===== {self.name} =====\n" + super().tails(lines)

    def published(self) -> tuple[int, int, int] | None:
        """The controller's published total of ``vcs``: (base, borrowed, total)."""
        for t in self.c.resource_totals():
            if t.name == "vcs":
                return t.base, t.borrowed, t.total
        return None

    def borrowed_by_facts(self) -> int:
        """Units the facts say this cluster holds from the pool."""
        return sum(g.count for g in self.state().grants.values()
                   if g.state in ("granted", "return_planned", "returning"))

    def resources_cli(self, instance: str = "a") -> dict[str, Any]:
        """``provisioner resources -o json`` with a daemon's config, read from the controller as an operator would."""
        out = subprocess.run([sys.executable, "-m", "provisioner.cli", "--config", str(self.tmp / f"{instance}.yaml"),
                              "resources", "-o", "json"], capture_output=True, text=True, timeout=30, check=True)
        return {row["name"]: row for row in json.loads(out.stdout)}


# --- the pool ledger, read as one snapshot ---------------------------------------------


def ledger_held(url: str) -> dict[str, int]:
    """Units each cluster holds from the pool, per the ledger's grant records, read at one moment.

    SQLite: one statement. etcd: one transaction reading the grant records and
    the pool's key (which every change rewrites under a compare-and-swap), at
    one revision; the two must agree.
    """
    if url.startswith("sqlite://"):
        path = url[len("sqlite://"):]
        if not Path(path).exists():
            return {}
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        try:
            rows = db.execute("SELECT cluster, SUM(count) FROM grants WHERE pool = ? AND count > 0 GROUP BY cluster",
                              (FEATURE,)).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return {}
            raise
        finally:
            db.close()
        return {c: int(n) for c, n in rows}
    hostport, prefix = url[len("etcd://"):].split("/", 1)
    root = f"/{prefix}/".encode()
    grants = root + b"grants/"
    reply = _etcd(hostport, "kv/txn", {"success": [
        {"request_range": {"key": _b64(grants), "range_end": _b64(grants[:-1] + b"0")}},
        {"request_range": {"key": _b64(root + b"pools/" + FEATURE.encode())}},
    ]})
    kvs = [r.get("response_range", {}).get("kvs", []) for r in reply["responses"]]
    held: dict[str, int] = {}
    for kv in kvs[0]:
        g = json.loads(base64.b64decode(kv["value"]))
        if g["pool"] == FEATURE and g["count"] > 0:
            held[g["cluster"]] = held.get(g["cluster"], 0) + int(g["count"])
    pool = {c: int(n) for c, n in json.loads(base64.b64decode(kvs[1][0]["value"]))["held"].items()
            if int(n) > 0} if kvs[1] else {}
    assert pool == held, f"the pool's key says {pool}, its grant records {held}"
    return held


def _etcd(hostport: str, path: str, body: dict) -> dict:
    host = hostport.split(",")[0]
    ask = urllib.request.Request(f"http://{host}/v3/{path}", data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(ask, timeout=5) as reply:
        return json.loads(reply.read())


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
