"""How a host made for one of a scheduler's names learns it: the name in the instance's user data.

Slurm's power saving names the nodes it wants up (``cloud1``), and the host
made for one must register under that name (``slurmd -N cloud1``) before
anything else can tell it: the user data is what a host reads from its own
launch when it boots. The name is also the instance's ``Name`` tag and its
``provisioner:node`` tag (``launch``), which is how ``status`` and ``list``
report the machine under it.

A template's user data is the operator's file, in any format EC2 and
cloud-init take, so the name goes in only where its place is certain:

- wherever the file says ``{{PROVISIONER_NODE_NAME}}``, in any format
  (cloud-config, a script, MIME parts): each is replaced by the name, and by
  nothing for a host made without one;
- a shell script (``#!/bin/bash``, ``#!/usr/bin/env sh`` ...) without it gets
  ``export PROVISIONER_NODE_NAME=cloud1`` as its second line;
- a template without user data gets the line ``PROVISIONER_NODE_NAME=cloud1``
  alone, for the host to read from its instance metadata;
- any other file is refused for a named host (exit 78 naming it): a host that
  boots without its name never registers under it, and the provider cannot
  tell where in such a file a name would go.

A host made without a name gets the file unchanged (but for the placeholder).
Names are checked before they get here (``inputs.NodeName``): a host name's
characters, nothing a shell would take for more than a word.
"""

from __future__ import annotations

import os

from providers.ec2.errors import CONFIG, ProviderError
from providers.ec2.settings import USER_DATA_LIMIT

#: The variable the host's user data gives the name in.
VARIABLE = "PROVISIONER_NODE_NAME"
#: Replaced by the name wherever a template's user data holds it.
PLACEHOLDER = b"{{" + VARIABLE.encode() + b"}}"
#: Interpreters of a script that takes ``export NAME=VALUE`` as its second line.
SHELLS = frozenset({"sh", "bash", "dash", "ash", "ksh", "zsh"})


def user_data(template: bytes | None, name: str | None, where: str) -> bytes | None:
    """The user data of one instance: the template's (``None``: it has none), given the name it is made for.

    ``where`` names the template's user data file in an error.
    """
    if template is not None and PLACEHOLDER in template:
        out = template.replace(PLACEHOLDER, (name or "").encode())
    elif name is None:
        return template
    elif template is None:
        return f"{VARIABLE}={name}\n".encode()
    elif is_shell_script(template):
        first, newline, rest = template.partition(b"\n")
        out = first + b"\n" + f"export {VARIABLE}={name}\n".encode() + (rest if newline else b"")
    else:
        raise ProviderError(CONFIG, f"{where}: a host made for a named node needs its name in its user data: "
                                    f"put {PLACEHOLDER.decode()} where it goes (the file is not a shell script "
                                    "the provider can add it to)")
    if len(out) > USER_DATA_LIMIT:
        raise ProviderError(CONFIG, f"{where}: with the name {name!r} the user data is {len(out)} bytes; "
                                    f"EC2 takes at most {USER_DATA_LIMIT}")
    return out


def is_shell_script(data: bytes) -> bool:
    """Whether ``data`` starts with a ``#!`` line naming a POSIX-like shell, directly or through ``env``."""
    if not data.startswith(b"#!"):
        return False
    words = data[2:].split(b"\n", 1)[0].decode("latin-1").split()
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
    return bool(words) and os.path.basename(words[0]) in SHELLS
