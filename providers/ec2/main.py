"""``provisioner-ec2 ACTION -f INPUT.json`` (or ``provisioner-ec2 serve``): the command line the daemon runs.

This is the only place that touches the process: arguments, the input
file, the environment, stdout, stderr and the exit code. It turns every way
an action can end into one JSON answer (exit 0) or one line on stderr with
the contract's exit code, and nothing it prints carries a credential.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

NAME = "provisioner-ec2"
try:
    from providers.ec2.errors import BAD_INPUT, FAILED, OK, USAGE, ProviderError, describe, exit_code, scrub
except ModuleNotFoundError as exc:  # boto3 is the ec2 extra: say so rather than a traceback
    if (exc.name or "").split(".")[0] not in ("boto3", "botocore"):
        raise
    MISSING: str | None = (exc.name or "").split(".")[0]
else:
    MISSING = None
MUTATING = ("request", "return")
USAGE_TEXT = (
    f"usage: {NAME} ACTION -f INPUT.json\n"
    f"       {NAME} serve     (persistent mode: calls as JSON lines on stdin, answers on stdout)\n"
    "  ACTION: describe request status return list reclaims\n"
    "  settings: the YAML or JSON file named by EC2_PROVIDER_CONFIG\n"
    "  AWS credentials, profile, region and endpoint: the usual AWS_* variables\n"
)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if MISSING:
        sys.stderr.write(f"{NAME}: {MISSING} is not installed: the EC2 provider needs the ec2 extra "
                         "(pip install 'provisioner[ec2]')\n")
        return 1
    if argv[:1] in (["-h"], ["--help"]):
        sys.stdout.write(USAGE_TEXT)
        return OK
    if argv == ["serve"]:
        from providers.ec2.serve import serve

        return serve(os.environ, _say)
    from providers.ec2.actions import ACTIONS

    if len(argv) != 3 or argv[0] not in ACTIONS or argv[1] != "-f":
        sys.stderr.write(USAGE_TEXT)
        return USAGE
    action = argv[0]
    try:
        answer = run(action, argv[2], os.environ)
    except Exception as exc:  # every failure ends as one line and an exit code
        code = exit_code(exc)
        if code == FAILED and not isinstance(exc, ProviderError):
            # Not an AWS answer the contract has a code for: most likely a bug here; say where.
            for line in traceback.format_exc().splitlines()[:-1]:
                _say(scrub(line))
        _say(f"{action}: {describe(exc)}")
        return code
    sys.stdout.write(json.dumps(answer, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    return OK


def run(action: str, input_path: str, env: Any) -> dict[str, Any]:
    """Read the input, load the settings, connect, and run one action."""
    from providers.ec2 import settings as settings_file
    from providers.ec2.actions import ACTIONS
    from providers.ec2.clients import connect

    doc = read_input(input_path)
    if action in MUTATING:
        doc = with_token(doc, env.get("PROVISIONER_TOKEN", ""))
    settings = settings_file.load(env)
    clients = connect(settings.region, env, log=_say)
    return ACTIONS[action](settings, clients, doc)


def read_input(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as exc:
        raise ProviderError(BAD_INPUT, f"input file {path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise ProviderError(BAD_INPUT, f"input file {path}: not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ProviderError(BAD_INPUT, f"input file {path}: expected a JSON object")
    return doc


def with_token(doc: dict[str, Any], token: str) -> dict[str, Any]:
    """The input's token, or the environment's when the input has none; two different ones are an error."""
    said = doc.get("token")
    if token and said and said != token:
        raise ProviderError(BAD_INPUT, "input token: differs from PROVISIONER_TOKEN")
    return {**doc, "token": said or token} if (said or token) else doc


def _say(line: str) -> None:
    sys.stderr.write(f"{NAME}: {line}\n")
    sys.stderr.flush()


if __name__ == "__main__":
    sys.exit(main())
