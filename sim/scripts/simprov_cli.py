"""Command line of the simulated provider: v2 actions, LSF actions and admin commands.

The config and state folder come from the environment, as for any provider
script: SIM_CONFIG and SIM_STATE_DIR (from the provider's env_file), or for an
LSF-style provider $PRO_CONF_DIR/conf/sim_config.json and $PRO_DATA_DIR.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Dict, List, Mapping

import simprov_admin as admin
from simprov_calls import parse_v2
from simprov_clock import now
from simprov_config import ACTIONS, load_config
from simprov_engine import advance, perform
from simprov_exit import BAD_INPUT, CONFIG, USAGE, SimExit, read_json
from simprov_lsf import ACTIONS as LSF_ACTIONS
from simprov_lsf import parse_lsf, render
from simprov_serve import HUGE, serve
from simprov_store import locked_state

USAGE_TEXT = (
    "usage: sim-provider ACTION -f INPUT.json       ACTION: " + " ".join(ACTIONS) + "\n"
    "       sim-provider lsf LSF_ACTION -f INPUT.json   LSF_ACTION: " + " ".join(LSF_ACTIONS) + "\n"
    "       sim-provider serve                            (persistent mode: JSON lines on stdin and stdout)\n"
    "       sim-provider admin dump | reclaim MACHINE | set-in-use RESOURCE N"
)


def config_path(env: Mapping[str, str]) -> str:
    if env.get("SIM_CONFIG"):
        return env["SIM_CONFIG"]
    if env.get("PRO_CONF_DIR"):
        return os.path.join(env["PRO_CONF_DIR"], "conf", "sim_config.json")
    if env.get("HF_PROVIDER_CONFDIR"):
        return os.path.join(env["HF_PROVIDER_CONFDIR"], "sim_config.json")
    raise SimExit(CONFIG, "no sim config: set SIM_CONFIG in the provider's env_file "
                          "(or PRO_CONF_DIR for LSF style, read as $PRO_CONF_DIR/conf/sim_config.json)")


def state_dir(env: Mapping[str, str]) -> str:
    folder = env.get("SIM_STATE_DIR") or env.get("PRO_DATA_DIR") or env.get("HF_PROVIDER_WORKDIR")
    if not folder:
        raise SimExit(CONFIG, "no state folder: set SIM_STATE_DIR in the provider's env_file "
                              "(or PRO_DATA_DIR for LSF style)")
    return folder


def read_input(args: List[str]) -> Dict[str, Any]:
    """The call's input document, from ``-f PATH`` as the contract passes it."""
    if len(args) != 2 or args[0] != "-f":
        raise SimExit(USAGE, USAGE_TEXT)
    path = args[1]
    doc = read_json(path, BAD_INPUT, "input file")
    if not isinstance(doc, dict):
        raise SimExit(BAD_INPUT, f"input file {path}: must hold a JSON object")
    return doc


def _print(doc: Dict[str, Any], indent: Any = None) -> None:
    sys.stdout.write(json.dumps(doc, indent=indent, sort_keys=indent is not None) + "\n")
    sys.stdout.flush()


def _serve(action: str, args: List[str], lsf: bool) -> int:
    env = os.environ
    cfg = load_config(config_path(env))
    folder = state_dir(env)
    doc = read_input(args)
    call = parse_lsf(action, doc, cfg, env) if lsf else parse_v2(action, doc, cfg, env.get("PROVISIONER_TOKEN"))
    with locked_state(folder) as state:
        answer = perform(cfg, state, now(), call)
    if answer.hang:
        time.sleep(answer.hang)
    if answer.printed == "garbage":
        sys.stdout.write("sim-provider: this is not JSON\n")
    elif answer.printed == "huge":
        sys.stdout.write("x" * HUGE + "\n")
    else:
        _print(render(action, answer.output) if lsf else answer.output)
    return 0


def _admin(args: List[str]) -> int:
    env = os.environ
    command = args[:1]
    if command == ["dump"] and len(args) == 1:
        with locked_state(state_dir(env)) as state:
            advance(state, now())
            _print(state, indent=2)
    elif command == ["reclaim"] and len(args) == 2:
        with locked_state(state_dir(env)) as state:
            advance(state, now())
            _print(admin.reclaim(state, now(), args[1]))
    elif command == ["set-in-use"] and len(args) == 3:
        cfg = load_config(config_path(env))
        with locked_state(state_dir(env)) as state:
            _print(admin.set_in_use(cfg, state, args[1:]))
    else:
        raise SimExit(USAGE, USAGE_TEXT)
    return 0


def main(argv: List[str]) -> int:
    try:
        if argv[:1] == ["admin"]:
            return _admin(argv[1:])
        if argv == ["serve"]:
            return serve(config_path, state_dir)
        if argv[:1] == ["lsf"] and len(argv) >= 2 and argv[1] in LSF_ACTIONS:
            return _serve(argv[1], argv[2:], lsf=True)
        if argv and argv[0] in ACTIONS:
            return _serve(argv[0], argv[1:], lsf=False)
        raise SimExit(USAGE, USAGE_TEXT)
    except SimExit as e:
        sys.stderr.write(f"sim-provider: {e.message}\n")
        return e.code
