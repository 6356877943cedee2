"""What a requestId holds, so that ``status`` can find a request's instances with no state of its own.

The provider keeps no files: the daemon may move a provider to another host
at any time, and a repeated token must be recognised there too. So a
requestId carries what ``status`` needs, and the rest is in EC2's tags:

- ``run:TOKEN:COUNT``: a launch; its instances carry the tag
  ``provisioner:token=TOKEN``, and COUNT says how many must become visible.
- ``terminate:TOKEN:EPOCH:ID,ID,...``: a return; the instance ids, and when
  it was asked, so that an id EC2 does not show yet is told apart from one
  long gone.

Tokens are parsed from the right, so a token holding ``:`` still works.
"""

from __future__ import annotations

from dataclasses import dataclass

from providers.ec2.errors import BAD_INPUT, ProviderError


@dataclass(frozen=True)
class Launch:
    token: str
    count: int

    def __str__(self) -> str:
        return f"run:{self.token}:{self.count}"


@dataclass(frozen=True)
class Termination:
    token: str
    asked_at: int
    instance_ids: tuple[str, ...]

    def __str__(self) -> str:
        return f"terminate:{self.token}:{self.asked_at}:{','.join(self.instance_ids)}"


def parse(request_id: str, where: str = "requestId") -> Launch | Termination:
    kind, _, rest = request_id.partition(":")
    try:
        if kind == "run":
            token, count = rest.rsplit(":", 1)
            if token and int(count) >= 1:
                return Launch(token, int(count))
        elif kind == "terminate":
            token, asked_at, ids = rest.rsplit(":", 2)
            if token and ids:
                return Termination(token, int(asked_at), tuple(ids.split(",")))
    except ValueError:
        pass
    raise ProviderError(BAD_INPUT, f"{where}: not a request of this provider: {request_id[:80]!r}")
