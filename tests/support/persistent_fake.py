"""A persistent provider that does what a test tells it: the fake behind the protocol tests.

Run as ``<this> serve``. ``FAKE_PLAN`` names a JSON file of how it starts
(``hello``: normal, none, garbage, protocol2, exit78, exit1; ``hello_delay``;
``pings``: answer or ignore; ``fail_starts``: that many first starts exit 1
before their hello; ``child``: start a child that sleeps in its group).
Each ``status`` call's first requestId says how to answer it: ``sleep=S``,
``garbage``, ``huge=N``, ``exit=N``, ``close``, ``hang``, ``fail=N``, ``bad``,
``secret``, ``chatty`` (the secret in a status message), ``leaky`` (in a machine's
name), ``stop`` (SIGSTOP itself), ``unknown``; anything else is answered
at once as running. ``FAKE_LOG`` gets one JSON line per start, call, ping and
answer, for the test to read back. Standard library only.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

LOG = os.environ.get("FAKE_LOG", "")
PLAN = json.load(open(os.environ["FAKE_PLAN"])) if os.environ.get("FAKE_PLAN") else {}
lock = threading.Lock()
inflight = [0]


def record(**event):
    if not LOG:
        return
    event["t"] = time.time()
    with lock, open(LOG, "a") as f:
        f.write(json.dumps(event) + "\n")


def starts():
    if not LOG or not os.path.exists(LOG):
        return 0
    with open(LOG) as f:
        return sum(1 for line in f if '"event": "start"' in line)


def write(raw):
    with lock:
        os.write(1, raw if isinstance(raw, bytes) else raw.encode())


def send(doc):
    write(json.dumps(doc) + "\n")


def answer(call):
    """What to write back (a document, or raw bytes), None for nothing."""
    call_id, doc = call["id"], call.get("input") or {}
    if call["action"] == "describe":
        return {"id": call_id, "exit": 0, "output": {"templates": [{"id": "t", "max_number": 3}]}}
    ids = [r.get("requestId", "") for r in doc.get("requests", [])] or [""]
    word, _, arg = ids[0].partition("=")
    if word == "sleep":
        time.sleep(float(arg))
    elif word == "garbage":
        return b"this is not json\n"
    elif word == "huge":
        return ('{"id": "%s", "pad": "%s"}\n' % (call_id, "x" * int(arg))).encode()
    elif word == "exit":
        os._exit(int(arg))
    elif word == "close":
        os.close(1)
        time.sleep(600)
    elif word == "hang":
        return None
    elif word == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
        return None
    elif word == "fail":
        return {"id": call_id, "exit": int(arg), "message": "told to fail"}
    elif word == "bad":
        return {"id": call_id, "exit": 0, "output": {"requests": [{"requestId": "x", "status": "weird"}]}}
    elif word == "secret":
        secret = os.environ.get("SECRET", "")
        sys.stderr.write(f"using {secret} now\n")
        sys.stderr.flush()
        return {"id": call_id, "exit": 75, "message": f"throttled for {secret}"}
    elif word in ("chatty", "leaky"):
        secret = os.environ.get("SECRET", "")
        name = f"h-{secret}" if word == "leaky" else "h-1"
        return {"id": call_id, "exit": 0, "output": {"requests": [
            {"requestId": "r-1", "status": "running", "message": f"waiting, key {secret}",
             "machines": [{"machineId": "m-1", "name": name}]}]}}
    elif word == "unknown":
        send({"id": "c-nobody", "exit": 0, "output": {}})
    record(event="answer", id=call_id)
    return {"id": call_id, "exit": 0, "output": {"requests": [
        {"requestId": r, "status": "running", "machines": []} for r in ids]}}


def run_call(call):
    out = None
    try:
        out = answer(call)
    finally:
        with lock:  # no longer in flight once answered: the daemon may send the next at once
            inflight[0] -= 1
    if isinstance(out, bytes):
        write(out)
    elif out is not None:
        send(out)


def main():
    if sys.argv[1:] != ["serve"]:
        sys.stderr.write("usage: fake serve\n")
        return 64
    n = starts()
    record(event="start", pid=os.getpid(), env=dict(os.environ), n=n)
    if PLAN.get("child"):
        child = subprocess.Popen(["sleep", "600"])
        record(event="child", pid=child.pid)
    if n < PLAN.get("fail_starts", 0):
        sys.stderr.write(f"start {n} fails as told\n")
        return 1
    time.sleep(PLAN.get("hello_delay", 0))
    hello = PLAN.get("hello", "normal")
    if hello == "garbage":
        write("hello there\n")
    elif hello == "protocol2":
        send({"hello": {"protocol": 2, "actions": ["status"]}})
    elif hello in ("exit78", "exit1"):
        sys.stderr.write("cannot read my settings\n")
        return int(hello[4:])
    elif hello == "normal":
        send({"hello": {"protocol": 1, "actions": PLAN.get("actions", ["describe", "status"])}})
    for raw in sys.stdin:
        call = json.loads(raw)
        if call.get("action") == "ping":
            record(event="ping", id=call["id"])
            if PLAN.get("pings", "answer") == "answer":
                send({"id": call["id"], "exit": 0, "output": {}})
            continue
        with lock:
            inflight[0] += 1
            now_in = inflight[0]
        record(event="call", id=call["id"], action=call["action"], input=call.get("input"),
               deadline=call.get("deadline"), inflight=now_in)
        threading.Thread(target=run_call, args=(call,), daemon=True).start()
    record(event="eof")
    return 0


if __name__ == "__main__":
    sys.exit(main())
