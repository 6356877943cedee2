"""Exit codes, and how an AWS error becomes one.

The daemon acts on the exit code alone (docs/script-contract.md): 75 is
retried after a backoff, 69 moves the demand to another provider, 77 and 78
disable the provider until an operator steps in. So the class of an error
decides what happens to the cluster, and a wrong class is expensive: a
throttle mistaken for a configuration error disables a healthy provider, a
permission error mistaken for a throttle retries forever in silence.

Every message that leaves the provider goes through ``scrub``: AWS error
texts do not carry secret keys, but a mistake here must not be the one place
a credential is printed. What is secret is what the daemon calls secret
(docs/script-contract.md): the values of variables named so, such as
``AWS_SECRET_ACCESS_KEY`` and ``AWS_SESSION_TOKEN``. An access key's id, a
region or an endpoint is not, and stays readable.
"""

from __future__ import annotations

import os
import re
from typing import Any

from botocore.exceptions import (
    ClientError,
    ConnectionError,
    CredentialRetrievalError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
    PartialCredentialsError,
    ProfileNotFound,
    TokenRetrievalError,
)
from botocore.parsers import ResponseParserError

OK = 0
FAILED = 1
USAGE = 64
BAD_INPUT = 65
CAPACITY = 69
TRANSIENT = 75
CREDENTIALS = 77
CONFIG = 78

#: No capacity for this request here: the next subnet (zone) may have some.
CAPACITY_CODES = frozenset({
    "InsufficientInstanceCapacity",
    "InsufficientCapacity",
    "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity",
    "InsufficientAddressCapacity",
    "InsufficientFreeAddressesInSubnet",
    "InstanceLimitExceeded",
    "VcpuLimitExceeded",
    "MaxSpotInstanceCountExceeded",
    "SpotMaxPriceTooLow",
    "InsufficientSpotInstanceCapacity",
    "SpotCapacityNotAvailable",
    "UnfulfillableCapacity",
})
#: The instance type is not offered in this zone: another subnet may be in a zone that has it.
ZONE_CODES = frozenset({"Unsupported"})
TRANSIENT_CODES = frozenset({
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "EC2ThrottledException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ServiceUnavailable",
    "Unavailable",
    "InternalError",
    "InternalFailure",
    "ServerInternal",
    "RequestTimeout",
    "RequestTimeoutException",
    "PriorRequestNotComplete",
})
CREDENTIAL_CODES = frozenset({
    "AuthFailure",
    "UnauthorizedOperation",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "AccessDenied",
    "AccessDeniedException",
    "ExpiredToken",
    "ExpiredTokenException",
    "RequestExpired",
    "OptInRequired",
    "Blocked",
    "MissingAuthenticationToken",
    "UnrecognizedClientException",
    "IncompleteSignature",
})
CONFIG_CODES = frozenset({
    "MissingParameter",
    "UnknownParameter",
    "ValidationError",
    "IdempotentParameterMismatch",
})


class ProviderError(Exception):
    """An action that ends with a non-zero exit; ``message`` is what the daemon records as the reason."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def aws_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def http_status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def exit_code(exc: BaseException) -> int:
    """The contract's exit code for an exception raised by boto3."""
    if isinstance(exc, ProviderError):
        return exc.code
    if isinstance(exc, ClientError):
        code = aws_code(exc)
        if code in CAPACITY_CODES:
            return CAPACITY
        if code in TRANSIENT_CODES:
            return TRANSIENT
        if code in CREDENTIAL_CODES:
            return CREDENTIALS
        if code in CONFIG_CODES or code in ZONE_CODES or code.startswith("Invalid"):
            return CONFIG
        if http_status(exc) >= 500:
            return TRANSIENT
        if http_status(exc) in (401, 403):
            return CREDENTIALS
        return FAILED
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError, CredentialRetrievalError, TokenRetrievalError)):
        return CREDENTIALS
    if isinstance(exc, (NoRegionError, ProfileNotFound, ParamValidationError)):
        return CONFIG
    if isinstance(exc, (HTTPClientError, ConnectionError, IncompleteReadError, ResponseParserError)):
        return TRANSIENT
    return FAILED


def describe(exc: BaseException) -> str:
    """A one-line account of an error, without secrets."""
    if isinstance(exc, ProviderError):
        return scrub(exc.message)
    if isinstance(exc, ClientError):
        code = aws_code(exc)
        text = str(exc.response.get("Error", {}).get("Message", "")).strip()
        # The encoded authorization message holds the request context (principal, resources): it
        # is for `aws sts decode-authorization-message`, not for a log line.
        text = text.split(" Encoded authorization failure message:")[0]
        operation = getattr(exc, "operation_name", "") or "call"
        return scrub(f"{operation}: {code}: {text}" if text else f"{operation}: {code}")
    return scrub(f"{type(exc).__name__}: {exc}")


def capacity_like(exc: BaseException) -> bool:
    """Whether another subnet (zone) may succeed where this one failed."""
    return isinstance(exc, ClientError) and (aws_code(exc) in CAPACITY_CODES or aws_code(exc) in ZONE_CODES)


#: The daemon's rule for secret variables (providers/environment.py), written out again because this
#: provider imports nothing of the daemon; a test holds the two to the same answers.
_SECRET_WORDS = re.compile(r"SECRET|TOKEN|PASSWORD|CREDENTIAL", re.IGNORECASE)
_KEY_WORD = re.compile(r"KEY", re.IGNORECASE)
_KEY_ID_END = re.compile(r"KEY_ID$", re.IGNORECASE)
#: The idempotency token the daemon sets for a call: no env_file may set it, and it is no secret.
_DAEMON_VARS = frozenset({"PROVISIONER_TOKEN"})
_MIN_SECRET_LEN = 4


def secret_name(name: str) -> bool:
    """Whether the variable ``name`` holds a secret, by the daemon's rule: ``*SECRET*``, ``*TOKEN*``,
    ``*PASSWORD*``, ``*CREDENTIAL*``, and ``*KEY*`` except in a name ending in ``KEY_ID``."""
    if name in _DAEMON_VARS:
        return False
    return bool(_SECRET_WORDS.search(name) or _KEY_WORD.search(_KEY_ID_END.sub("", name)))


def scrub(text: str, env: Any = None) -> str:
    """``text`` on one line, with the value of every secret variable of the environment masked."""
    env = os.environ if env is None else env
    values = sorted((v for k, v in env.items() if len(v or "") >= _MIN_SECRET_LEN and secret_name(k)),
                    key=len, reverse=True)
    for value in values:
        text = text.replace(value, "***")
    return " ".join(text.split())[:500]
