"""LSF / Host Factory mode: the five plugin actions mapped onto the v2 ones.

The state and behaviour are the v2 simulator's; only the documents read and
printed change, so a provider can be driven through either contract (or both,
on one state folder) and tell the same story.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping

from simprov_calls import Call, bad, count, machines, request_ids, text
from simprov_config import SimConfig
from simprov_exit import CONFIG, SimExit

ACTIONS = {
    "getAvailableTemplates": "describe",
    "requestMachines": "request",
    "getRequestStatus": "status",
    "requestReturnMachines": "return",
    "getReturnRequests": "reclaims",
}


def _token(env: Mapping[str, str], user_data: Any, cfg: SimConfig) -> Any:
    """The daemon's token if it gave one; a plain LSF caller gives none and gets a new request each call, as
    does every caller of a provider that ``ignores_tokens`` (IBM's plugins look for none)."""
    if cfg.ignores_tokens:
        return None
    if env.get("PROVISIONER_TOKEN"):
        return env["PROVISIONER_TOKEN"]
    if isinstance(user_data, dict) and isinstance(user_data.get("provisioner_token"), str):
        return user_data["provisioner_token"] or None
    return None


def parse_lsf(lsf_action: str, doc: Dict[str, Any], cfg: SimConfig, env: Mapping[str, str]) -> Call:
    if cfg.kind != "hosts":
        raise SimExit(CONFIG, f"LSF mode serves hosts only; the sim config has kind {cfg.kind!r}")
    action = ACTIONS[lsf_action]
    if action == "request":
        template = doc.get("template")
        if not isinstance(template, dict):
            raise bad(lsf_action, "template", "must be an object {templateId, machineCount}")
        return Call(action, token=_token(env, doc.get("userData"), cfg), lsf=True,
                    what=text(template, "templateId", lsf_action, "template.templateId"),
                    count=count(template, "machineCount", lsf_action, "template.machineCount"))
    if action == "status":
        return Call(action, request_ids=tuple(request_ids(doc, lsf_action)), lsf=True)
    if action == "return":
        return Call(action, token=_token(env, None, cfg), machines=machines(doc, lsf_action), lsf=True)
    if action == "reclaims":
        given = machines(doc, lsf_action) if doc.get("machines") is not None else []
        return Call(action, machines=given, lsf=True)
    return Call(action, lsf=True)


def _attribute(value: Any) -> list:
    if isinstance(value, bool):
        return ["Boolean", "1" if value else "0"]
    if isinstance(value, (int, float)):
        return ["Numeric", str(int(value)) if float(value).is_integer() else str(value)]
    return ["String", str(value)]


def render(lsf_action: str, output: Dict[str, Any]) -> Dict[str, Any]:
    """The v2 answer in the shape the LSF action prints."""
    if lsf_action == "getAvailableTemplates":
        templates = [
            {
                "templateId": t["id"],
                "maxNumber": t["max_number"],
                "attributes": {name: _attribute(v) for name, v in t["attributes"].items()},
                "priority": t.get("priority", output["priority"]),
            }
            for t in output["templates"]
        ]
        return {"templates": templates, "message": "Get available templates success."}
    if lsf_action == "requestMachines":
        return {"requestId": output["requestId"], "message": "Request VM from sim successful."}
    if lsf_action == "requestReturnMachines":
        return {"requestId": output["requestId"], "message": "Delete VM success."}
    if lsf_action == "getRequestStatus":
        return {"requests": [{k: v for k, v in r.items() if k != "granted"} for r in output["requests"]]}
    found = output["requests"]
    return {"status": "complete", "message": f"{len(found)} machines to return", "requests": found}
