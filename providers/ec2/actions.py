"""Every action by its contract name, and ``status``, which serves launches and returns alike.

An action is a plain function ``(settings, clients, input document) ->
output document`` that raises ``ProviderError`` (or a boto3 error) to end
with a non-zero exit. Nothing here reads the environment, the command line
or the clock directly, so a long-running server can call the same functions
for many requests with one client, and tests can call them with a fake one.
"""

from __future__ import annotations

from typing import Any, Callable

from providers.ec2.clients import Clients
from providers.ec2.describe import describe
from providers.ec2.errors import ProviderError
from providers.ec2.inputs import StatusIn, read
from providers.ec2.instances import FILTER_VALUES, TOKEN_TAG, Instance, by_ids, cluster_filter, find, tags
from providers.ec2.inventory import holdings, reclaims
from providers.ec2.launch import launch_status, request
from providers.ec2.request_ids import Launch, Termination, parse
from providers.ec2.settings import Settings
from providers.ec2.terminate import end, give_back, termination_status

Action = Callable[[Settings, Clients, Any], dict[str, Any]]


def status(settings: Settings, clients: Clients, doc: Any) -> dict[str, Any]:
    """The progress of launches and returns, with one DescribeInstances for all the launches asked
    about and one for all the returns, however many requests the daemon polls at once.

    A requestId this provider did not make is answered as failed rather than
    failing the whole poll: the other requests must still be followed.
    """
    req = read(StatusIn, doc)
    asked: list[tuple[str, Launch | Termination | ProviderError]] = []
    for n, r in enumerate(req.requests):
        try:
            asked.append((r.request_id, parse(r.request_id, f"requests[{n}].requestId")))
        except ProviderError as exc:
            asked.append((r.request_id, exc))
    launches = [a for _, a in asked if isinstance(a, Launch)]
    returns = [a for _, a in asked if isinstance(a, Termination)]
    by_token = _launched(settings, clients, [a.token for a in launches])
    seen = by_ids(clients, {i for a in returns for i in a.instance_ids})
    answers: list[dict[str, Any]] = []
    still_up: dict[str, list[str]] = {}
    for request_id, a in asked:
        if isinstance(a, Launch):
            answers.append(launch_status(settings, a, by_token.get(a.token, [])))
        elif isinstance(a, Termination):
            answer, up = termination_status(settings, clients, a, seen)
            answers.append(answer)
            if up:
                still_up.setdefault(a.token, []).extend(up)
        else:
            answers.append({"requestId": request_id, "status": "complete_with_error", "message": a.message,
                            "machines": []})
    for token, ids in still_up.items():
        # Returns whose instances EC2 did not show when they were asked: finish them now.
        end(clients, sorted(set(ids)), token)
    return {"requests": answers}


def _launched(settings: Settings, clients: Clients, tokens: list[str]) -> dict[str, list[Instance]]:
    out: dict[str, list[Instance]] = {}
    wanted = sorted(set(tokens))
    for start in range(0, len(wanted), FILTER_VALUES):
        chunk = wanted[start:start + FILTER_VALUES]
        for i in find(clients, [cluster_filter(settings), {"Name": f"tag:{TOKEN_TAG}", "Values": chunk}]):
            out.setdefault(tags(i).get(TOKEN_TAG, ""), []).append(i)
    return out


ACTIONS: dict[str, Action] = {
    "describe": describe,
    "request": request,
    "status": status,
    "return": give_back,
    "list": holdings,
    "reclaims": reclaims,
}
