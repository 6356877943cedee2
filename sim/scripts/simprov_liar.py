"""``sim-liar``: the simulated provider behind a seeded schedule of faults, for the liar soak.

It is run exactly as ``sim-provider`` is (``sim-liar ACTION -f INPUT.json``,
the same ``SIM_CONFIG`` and ``SIM_STATE_DIR``), and answers from the same
simulated world, except when its schedule says to misbehave:

- ``slow``: the work is done, the answer comes near the script timeout (half
  of it to nine tenths);
- ``late``: the work is done, the answer would come past the timeout, so the
  daemon kills the run: an unknown outcome;
- ``transient``: exit 75 before any work; ``transient_after``: exit 75 after
  the work was done (a cloud whose answer was lost on the way);
- ``capacity``: exit 69 before any work (``request`` only);
- ``killed``: the script dies by SIGKILL: before the work, in the middle of it
  (the world's change is never saved) or after it (saved, never answered);
- ``hide``: ``list`` leaves a machine out for a while, shorter or longer than
  the owner's ``policy.lost_after`` (a cloud's eventually consistent list);
- ``lie``: a ``return`` is answered, and its status reported ``complete``,
  while nothing was returned: the machines run on and the grants keep their
  units (a return that ended nothing).

Repeated host names across providers need no wrapper: give two simulated
clouds the same ``name_prefix`` and both make ``node-1``.

The schedule is a function of the seed: the fault of a call is drawn from
the seed and the call's number (calls are counted in this wrapper's state),
a machine's hiding window from the seed and its id, whether a return lies
from the seed and its token (a repeat of the token gets the same answer). The
order in which a live daemon makes its calls is not fixed, so two runs with
one seed draw the same faults for their first calls, not for the same calls.

Everything it did is kept beside the simulator's state, as ground truth for
whoever checks the daemon against the world: ``liar.json`` (the calls
counted, the faults injected by kind, the windows machines were hidden in,
the returns that lied and what they named). Config: ``LIAR_CONFIG``, a JSON
file (see ``parse``); a missing or broken one exits 78, as for the simulator.

Standard library only, like the simulator it wraps.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sys
import time
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple

from simprov_calls import parse_v2
from simprov_chance import chance
from simprov_cli import config_path, read_input, state_dir
from simprov_clock import now
from simprov_config import ACTIONS, SimConfig, Span, load_config
from simprov_engine import perform
from simprov_exit import CAPACITY, CONFIG, TRANSIENT, USAGE, SimExit, read_json
from simprov_store import locked_state

#: Faults of one call, in the order their rates are laid out on [0, 1).
CALL_FAULTS = ("slow", "late", "transient", "transient_after", "capacity", "killed")
#: Where a ``killed`` call dies.
KILL_POINTS = ("before", "inside", "after")
LIAR_FILE = "liar.json"
LIAR_LOCK = "liar.lock"
#: Prefix of the request ids of returns that lied (never one the simulator makes).
LIE_PREFIX = "ret-lie-"


class HideConf(NamedTuple):
    #: Chance that a machine is hidden from ``list`` once in its life.
    rate: float
    #: When the hiding starts, after the machine's launch.
    after: Span
    #: How long a short hiding lasts (under ``lost_after``), and a long one (over it).
    short: Span
    long: Span
    #: Share of hidings that are long.
    long_share: float


class LieConf(NamedTuple):
    #: Chance that a return lies.
    rate: float
    #: Lies told at most about one machine or grant (a later return of it tells the truth).
    per_thing: int


class LiarConfig(NamedTuple):
    seed: Any
    #: The daemon's script timeout: slow answers come near it, late ones past it.
    timeout: float
    #: Chance of each call fault (``CALL_FAULTS``); they add up to at most 1.
    calls: Dict[str, float]
    hide: HideConf
    lie: LieConf


def _span(doc: Any, where: str) -> Span:
    if isinstance(doc, (int, float)) and not isinstance(doc, bool) and doc >= 0:
        return Span(float(doc), float(doc))
    if isinstance(doc, dict) and set(doc) == {"min", "max"} and all(
            isinstance(doc[k], (int, float)) and not isinstance(doc[k], bool) for k in doc) \
            and 0 <= doc["min"] <= doc["max"]:
        return Span(float(doc["min"]), float(doc["max"]))
    raise ValueError(f"{where}: must be seconds >= 0 or {{min, max}} with 0 <= min <= max, found {doc!r}")


def _rate(doc: Any, where: str) -> float:
    if isinstance(doc, (int, float)) and not isinstance(doc, bool) and 0 <= doc <= 1:
        return float(doc)
    raise ValueError(f"{where}: must be a chance in [0, 1], found {doc!r}")


def _keys(doc: Any, where: str, allowed: Tuple[str, ...]) -> Dict[str, Any]:
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: must be an object")
    unknown = sorted(set(doc) - set(allowed))
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(allowed)})")
    return doc


def parse(doc: Any) -> LiarConfig:
    """The liar's config; every key but ``seed`` and ``timeout`` may be left out (no such fault)."""
    d = _keys(doc, "config", ("seed", "timeout", "calls", "hide", "lie"))
    seed = d.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, (int, str)):
        raise ValueError(f"seed: must be an integer or a string, found {seed!r}")
    timeout = d.get("timeout")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ValueError(f"timeout: must be the daemon's script timeout in seconds (> 0), found {timeout!r}")
    calls = {k: _rate(v, f"calls.{k}") for k, v in _keys(d.get("calls", {}), "calls", CALL_FAULTS).items()}
    if sum(calls.values()) > 1:
        raise ValueError(f"calls: the chances add up to {sum(calls.values()):g}, more than 1")
    h = _keys(d.get("hide", {}), "hide", ("rate", "after", "short", "long", "long_share"))
    hide = HideConf(rate=_rate(h.get("rate", 0), "hide.rate"), after=_span(h.get("after", 0), "hide.after"),
                    short=_span(h.get("short", 0), "hide.short"), long=_span(h.get("long", 0), "hide.long"),
                    long_share=_rate(h.get("long_share", 0.5), "hide.long_share"))
    lie_doc = _keys(d.get("lie", {}), "lie", ("rate", "per_thing"))
    per_thing = lie_doc.get("per_thing", 1)
    if isinstance(per_thing, bool) or not isinstance(per_thing, int) or per_thing < 0:
        raise ValueError(f"lie.per_thing: must be an integer >= 0, found {per_thing!r}")
    return LiarConfig(seed=seed, timeout=float(timeout), calls=calls, hide=hide,
                      lie=LieConf(rate=_rate(lie_doc.get("rate", 0), "lie.rate"), per_thing=per_thing))


def load(path: str) -> LiarConfig:
    doc = read_json(path, CONFIG, "liar config")
    try:
        return parse(doc)
    except ValueError as e:
        raise SimExit(CONFIG, f"liar config {path}: {e}") from None


# --- the schedule: pure functions of the seed ------------------------------------------------


class Fault(NamedTuple):
    kind: str
    #: Seconds to sleep (slow, late), or where to die (killed).
    sleep: float = 0.0
    at: str = ""


def call_fault(cfg: LiarConfig, action: str, n: int) -> Optional[Fault]:
    """The fault of the ``n``-th call (an ``action`` call), if any."""
    u = chance(cfg.seed, "call", n)
    for kind in CALL_FAULTS:
        rate = cfg.calls.get(kind, 0.0)
        if u < rate:
            if kind == "capacity" and action != "request":
                return None
            v = chance(cfg.seed, "call", n, "how")
            if kind == "slow":
                return Fault(kind, sleep=cfg.timeout * (0.5 + 0.4 * v))
            if kind == "late":
                return Fault(kind, sleep=cfg.timeout * (1.5 + v))
            if kind == "killed":
                return Fault(kind, at=KILL_POINTS[min(int(v * len(KILL_POINTS)), len(KILL_POINTS) - 1)])
            return Fault(kind)
        u -= rate
    return None


def hide_window(cfg: LiarConfig, machine_id: str, launched: float) -> Optional[Tuple[float, float]]:
    """When ``list`` leaves this machine out: [start, end), or None if it never does."""
    h = cfg.hide
    if chance(cfg.seed, "hide", machine_id) >= h.rate:
        return None
    start = launched + h.after.pick(chance(cfg.seed, "hide", machine_id, "after"))
    long = chance(cfg.seed, "hide", machine_id, "long") < h.long_share
    span = h.long if long else h.short
    return start, start + span.pick(chance(cfg.seed, "hide", machine_id, "length"))


def lies_about_return(cfg: LiarConfig, token: str) -> bool:
    return chance(cfg.seed, "lie", token) < cfg.lie.rate


# --- the wrapper's own state ----------------------------------------------------------------


def empty() -> Dict[str, Any]:
    return {"calls": 0, "injected": {}, "hidden": {}, "lies": {}, "lied_about": {}, "truths": {}}


@contextmanager
def liar_state(folder: str) -> Iterator[Dict[str, Any]]:
    """The wrapper's state, changed under its own lock (never held while the simulator's is)."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, LIAR_LOCK), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        path = os.path.join(folder, LIAR_FILE)
        try:
            with open(path, encoding="utf-8") as f:
                state = json.load(f)
        except FileNotFoundError:
            state = empty()
        yield state
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(state, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)


def _count(state: Dict[str, Any], kind: str) -> None:
    state["injected"][kind] = state["injected"].get(kind, 0) + 1


# --- one call ---------------------------------------------------------------------------------


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _things(cfg: SimConfig, doc: Dict[str, Any]) -> List[str]:
    """What a return names: machine ids (hosts), or grant tokens (units; whole grants only)."""
    if cfg.kind == "hosts":
        return [m.get("machineId") or m.get("name") or "" for m in doc.get("machines") or []]
    return [g for g in doc.get("grants") or [] if isinstance(g, str)]


def _lie_or_truth(cfg: SimConfig, liar: LiarConfig, folder: str, doc: Dict[str, Any],
                  t: float) -> Optional[Dict[str, Any]]:
    """A return's answer when it lies (the same for a repeat of its token), else None: the truth is told."""
    token = doc.get("token")
    if not isinstance(token, str) or not token:
        return None
    with liar_state(folder) as st:
        if token in st["lies"]:
            return {"requestId": st["lies"][token]["id"]}
        if token in st["truths"]:
            return None
        things = _things(cfg, doc)
        partial = cfg.kind == "units" and (not things or len(things) != len(doc.get("grants") or []))
        if partial or not things or not lies_about_return(liar, token) or any(
                st["lied_about"].get(x, 0) >= liar.lie.per_thing for x in things):
            st["truths"][token] = t
            return None
        rid = f"{LIE_PREFIX}{len(st['lies']) + 1:06d}"
        st["lies"][token] = {"id": rid, "at": t, "kind": cfg.kind, "things": things,
                             "machines": doc.get("machines") or [], "count": doc.get("count")}
        for x in things:
            st["lied_about"][x] = st["lied_about"].get(x, 0) + 1
        _count(st, "lie")
        return {"requestId": rid}


def _lied_status(lie: Dict[str, Any]) -> Dict[str, Any]:
    if lie["kind"] == "hosts":
        machines = [{"machineId": m.get("machineId", ""), "name": m.get("name", ""), "result": "succeed",
                     "status": "terminated", "privateIpAddress": "", "publicIpAddress": "", "launchtime": 0,
                     "message": ""} for m in lie["machines"]]
        return {"requestId": lie["id"], "status": "complete", "message": "", "machines": machines}
    return {"requestId": lie["id"], "status": "complete", "message": f"returned {lie['count']} units",
            "machines": []}


def _hide(liar: LiarConfig, folder: str, output: Dict[str, Any], t: float) -> Dict[str, Any]:
    """``list`` without the machines hidden now; each hiding is noted when first applied."""
    kept, hidden = [], []
    for m in output.get("machines", []):
        window = hide_window(liar, m["machineId"], float(m.get("launchtime") or 0))
        if window is not None and window[0] <= t < window[1]:
            hidden.append((m["machineId"], window))
        else:
            kept.append(m)
    if hidden:
        with liar_state(folder) as st:
            for mid, (start, end) in hidden:
                if mid not in st["hidden"]:
                    st["hidden"][mid] = {"start": start, "end": end, "first": t}
                    _count(st, "hide")
    return {**output, "machines": kept}


def _work(cfg: SimConfig, liar: LiarConfig, folder: str, action: str, doc: Dict[str, Any],
          fault: Optional[Fault]) -> Dict[str, Any]:
    """The call's answer from the simulated world, or from the wrapper's lies."""
    t = now()
    if action == "return":
        lied = _lie_or_truth(cfg, liar, folder, doc, t)
        if lied is not None:
            return lied
    lies: Dict[str, Any] = {}
    if action == "status":
        with liar_state(folder) as st:
            lies = {v["id"]: v for v in st["lies"].values()}
        asked = [r for r in doc.get("requests") or [] if isinstance(r, dict) and r.get("requestId") in lies]
        if asked:
            rest = [r for r in doc["requests"] if r not in asked]
            told = _sim(cfg, folder, action, {**doc, "requests": rest}, fault)["requests"] if rest else []
            by_id = {r["requestId"]: r for r in told}
            by_id.update({r["requestId"]: _lied_status(lies[r["requestId"]]) for r in asked})
            return {"requests": [by_id[r["requestId"]] for r in doc["requests"] if r["requestId"] in by_id]}
    out = _sim(cfg, folder, action, doc, fault)
    if action == "list":
        out = _hide(liar, folder, out, t)
    return out


def _sim(cfg: SimConfig, folder: str, action: str, doc: Dict[str, Any], fault: Optional[Fault]) -> Dict[str, Any]:
    call = parse_v2(action, doc, cfg, os.environ.get("PROVISIONER_TOKEN"))
    with locked_state(folder) as state:
        answer = perform(cfg, state, now(), call)
        if fault is not None and fault.kind == "killed" and fault.at == "inside":
            _die()  # mid-change: the world is never saved
    if answer.hang:
        time.sleep(answer.hang)
    return answer.output


def run(action: str, args: List[str]) -> int:
    env = os.environ
    if not env.get("LIAR_CONFIG"):
        raise SimExit(CONFIG, "no liar config: set LIAR_CONFIG in the provider's env_file")
    liar = load(env["LIAR_CONFIG"])
    cfg = load_config(config_path(env))
    folder = state_dir(env)
    doc = read_input(args)
    with liar_state(folder) as st:
        st["calls"] += 1
        fault = call_fault(liar, action, st["calls"])
        if fault is not None:
            _count(st, fault.kind if fault.kind != "killed" else f"killed_{fault.at}")
    if fault is not None:
        if fault.kind == "transient":
            raise SimExit(TRANSIENT, "injected: transient error before any work")
        if fault.kind == "capacity":
            raise SimExit(CAPACITY, "injected: capacity unavailable")
        if fault.kind == "killed" and fault.at == "before":
            _die()
    output = _work(cfg, liar, folder, action, doc, fault)
    if fault is not None:
        if fault.kind == "killed":
            _die()  # "after": the work is saved and never answered
        if fault.kind == "transient_after":
            raise SimExit(TRANSIENT, "injected: transient error after the work was done")
        if fault.kind in ("slow", "late"):
            time.sleep(fault.sleep)
    sys.stdout.write(json.dumps(output) + "\n")
    sys.stdout.flush()
    return 0


def main(argv: List[str]) -> int:
    try:
        if argv and argv[0] in ACTIONS:
            return run(argv[0], argv[1:])
        raise SimExit(USAGE, "usage: sim-liar ACTION -f INPUT.json       ACTION: " + " ".join(ACTIONS))
    except SimExit as e:
        sys.stderr.write(f"sim-liar: {e.message}\n")
        return e.code
