"""What a provider script sees of the world: its environment, and what it may not leak.

A script gets a fixed, small environment (docs/script-contract.md) rather than the daemon's:
the daemon's own variables (controller URLs, API tokens, a virtualenv's PATH)
are none of a script's business, and a script that works must keep working
when the daemon is started differently.

Of its env_file, only the secrets are kept out of what the daemon records: the
values of variables whose names say so, and of those the provider's config
lists (``script.secrets``). A region, an endpoint or a path is not a secret,
and masking it mangles what a script prints about it, host names included.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from pathlib import Path

from config.models import ProviderConfig

#: Scripts get this PATH unless the provider's env_file sets one: the daemon's own
#: PATH depends on how it was started (a virtualenv, a service manager) and would
#: make a script's behaviour depend on that too.
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
#: Taken from the daemon's environment when set there.
INHERITED = ("HOME", "LANG", "TZ")
#: Set by the daemon for every run; an env_file may not set them.
RESERVED = ("PROVIDER_NAME", "PROVIDER_KIND", "PROVISIONER_ACTION", "PROVISIONER_TOKEN", "PROVISIONER_DEADLINE")
#: Host Factory plugins that build paths from HF_VERSION only need it to be set.
HF_VERSION = "1.1"
#: Secret values this short are too common to scrub without mangling every message: they are
#: left as they are, and the runners warn once that they are (docs/script-contract.md).
MIN_SECRET_LEN = 4
#: A variable is secret when its name holds one of these words (in any case); ``KEY`` does not
#: count in a name ending in ``KEY_ID`` (an access key's id names the key, it does not open it).
_SECRET_WORDS = re.compile(r"SECRET|TOKEN|PASSWORD|CREDENTIAL", re.IGNORECASE)
_KEY_WORD = re.compile(r"KEY", re.IGNORECASE)
_KEY_ID_END = re.compile(r"KEY_ID$", re.IGNORECASE)

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DQ_ESCAPES = {'"': '"', "\\": "\\", "$": "$", "`": "`", "n": "\n", "t": "\t"}


class EnvFileError(ValueError):
    """A provider's env_file cannot be used; the message names file and line, never a value."""


def read_env_file(path: Path) -> dict[str, str]:
    """Parse ``KEY=VALUE`` lines the way a POSIX shell would read a simple assignment.

    Accepted: blank lines, ``#`` comments, an optional ``export`` prefix,
    unquoted values (taken verbatim to the end of the line, so a ``#`` inside a
    password stays part of it), single-quoted values (literal) and
    double-quoted values (``\\"``, ``\\\\``, ``\\$``, ``\\n``, ``\\t`` escapes).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EnvFileError(f"{path}: env_file not found") from None
    except UnicodeDecodeError as exc:
        raise EnvFileError(f"{path}: env_file is not UTF-8 (byte offset {exc.start})") from None
    except OSError as exc:
        raise EnvFileError(f"{path}: cannot read env_file: {exc.strerror}") from None
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("export ") or stripped.startswith("export\t"):
            stripped = stripped[len("export") :].lstrip()
        key, sep, raw = stripped.partition("=")
        if not sep:
            raise EnvFileError(f"{path}:{number}: expected KEY=VALUE")
        if not _KEY.fullmatch(key):
            raise EnvFileError(f"{path}:{number}: {key[:40]!r} is not a valid variable name")
        if key in RESERVED:
            raise EnvFileError(f"{path}:{number}: {key} is set by the daemon and cannot be overridden")
        try:
            values[key] = _value(raw)
        except ValueError as exc:
            raise EnvFileError(f"{path}:{number}: {key}: {exc}") from None
    return values


def _value(raw: str) -> str:
    if not raw or raw[0] not in "'\"":
        return raw.rstrip()
    quote = raw[0]
    out: list[str] = []
    i = 1
    while i < len(raw):
        ch = raw[i]
        if ch == quote:
            rest = raw[i + 1 :].strip()
            if rest and not rest.startswith("#"):
                raise ValueError("unexpected text after the closing quote")
            return "".join(out)
        if quote == '"' and ch == "\\" and i + 1 < len(raw) and raw[i + 1] in _DQ_ESCAPES:
            out.append(_DQ_ESCAPES[raw[i + 1]])
            i += 2
            continue
        out.append(ch)
        i += 1
    raise ValueError("unterminated quoted value (values cannot span lines)")


def script_env(
    provider: ProviderConfig,
    action: str,
    *,
    token: str | None,
    deadline: float | None,
    work_dir: Path,
    env_file: Mapping[str, str],
    daemon_env: Mapping[str, str],
    home: Path | None = None,
) -> dict[str, str]:
    """The whole environment of one script run.

    ``work_dir`` is the daemon's own folder for the provider (``<home>/providers/<name>``): the
    run's input file and an lsf plugin's log folder are there. An lsf plugin's data folder is
    ``script.work_dir`` when the config sets it (``data_dir``).

    Precedence, lowest first: PATH/HOME/LANG/TZ, the PRO_* / HF_* family (lsf
    style), the env_file (so an operator can point PRO_LSF_TOP elsewhere), and
    the daemon's own PROVIDER_* / PROVISIONER_* variables, which nothing overrides.
    A persistent provider's process (action ``serve``) has no deadline of its own:
    each of its calls carries one.
    """
    env: dict[str, str] = {"PATH": DEFAULT_PATH}
    for name in INHERITED:
        if daemon_env.get(name):
            env[name] = daemon_env[name]
    if home is not None:
        env["HOME"] = str(home)
    if provider.script.style == "lsf":
        env.update(_lsf_env(provider, work_dir))
    env.update(env_file)
    env["PROVIDER_NAME"] = provider.name
    env["PROVIDER_KIND"] = provider.kind
    env["PROVISIONER_ACTION"] = action
    if deadline is not None:
        env["PROVISIONER_DEADLINE"] = str(int(deadline))
    if token:
        env["PROVISIONER_TOKEN"] = token
    return env


def log_dir(work_dir: Path) -> Path:
    """Where lsf-style plugins are told to write their logs: the daemon's folder for the provider, as
    LSF kept a plugin's logs apart from its data (``LSF_LOGDIR``)."""
    return work_dir / "log"


def data_dir(provider: ProviderConfig, work_dir: Path) -> Path:
    """The folder an lsf plugin keeps its records in (PRO_DATA_DIR): ``script.work_dir`` when set, so a
    plugin moved from LSF finds the requests it knows of; else the daemon's folder for the provider."""
    return provider.script.work_dir or work_dir


def _lsf_env(provider: ProviderConfig, work_dir: Path) -> dict[str, str]:
    conf = str(provider.script.conf_dir or provider.script.path)
    data = str(data_dir(provider, work_dir))
    logs = str(log_dir(work_dir))
    return {
        "PRO_CONF_DIR": conf,
        "PRO_DATA_DIR": data,
        "PRO_LSF_LOGDIR": logs,
        "PRO_LSF_TOP": conf,
        "SCRIPT_OPTIONS": provider.script.script_options,
        "HF_PROVIDER_NAME": provider.name,
        "HF_PROVIDER_CONFDIR": conf,
        "HF_PROVIDER_WORKDIR": data,
        "HF_PROVIDER_LOGDIR": logs,
        "HF_TOP": conf,
        "HF_VERSION": HF_VERSION,
        "HF_CONFDIR": conf,
        "HF_WORKDIR": data,
        "HF_LOGDIR": logs,
    }


def secret_name(name: str, listed: Collection[str] = ()) -> bool:
    """Whether the variable ``name`` holds a secret: its name says so, or the provider's config lists it.

    Named secrets: ``*SECRET*``, ``*TOKEN*``, ``*PASSWORD*``, ``*CREDENTIAL*`` and ``*KEY*``, the last
    except in a name ending in ``KEY_ID`` (``AWS_ACCESS_KEY_ID`` is not secret,
    ``AWS_SECRET_ACCESS_KEY`` is). Listed names match exactly, as the env_file spells them.
    """
    if name in listed or _SECRET_WORDS.search(name):
        return True
    return bool(_KEY_WORD.search(_KEY_ID_END.sub("", name)))


def secrets_of(env_file: Mapping[str, str], listed: Collection[str] = ()) -> dict[str, str]:
    """The secret variables of an env_file, name to value (``secret_name``)."""
    return {name: value for name, value in env_file.items() if secret_name(name, listed)}


def unmasked_warning(provider: str, env_file: Path | None, names: tuple[str, ...]) -> str:
    """The warning for secret values too short to scrub: named, never shown."""
    which = f"{names[0]} is a secret" if len(names) == 1 else f"{', '.join(names)} are secrets"
    return (f"provider {provider}: {env_file}: {which} shorter than {MIN_SECRET_LEN} characters, not masked in "
            "what its scripts print (a longer value is; an empty one has nothing to hide)")


class Scrubber:
    """Replaces every secret value by ``***`` in text meant for people (reasons, stderr tails, messages),
    and finds the secret an identifier holds (an identifier is never rewritten: providers.output).

    ``secrets`` maps a variable's name to its value (``secrets_of``); values shorter than
    ``MIN_SECRET_LEN`` are not scrubbed, and ``unmasked`` names those that are not empty.
    """

    def __init__(self, secrets: Mapping[str, str]) -> None:
        kept = [(name, value) for name, value in secrets.items() if len(value) >= MIN_SECRET_LEN]
        # Longest first, so a secret that contains another is replaced whole.
        self._secrets = sorted(kept, key=lambda item: len(item[1]), reverse=True)
        #: How many characters before a cut could hide the start of a secret.
        self.margin = max((len(value) for _, value in self._secrets), default=0)
        #: Secret variables whose values are too short to scrub, sorted.
        self.unmasked = tuple(sorted(name for name, value in secrets.items() if 0 < len(value) < MIN_SECRET_LEN))

    @classmethod
    def of(cls, env_file: Mapping[str, str], listed: Collection[str] = ()) -> Scrubber:
        """The scrubber of a provider's env_file, with the secret names its config lists."""
        return cls(secrets_of(env_file, listed))

    def __call__(self, text: str) -> str:
        for _, secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def found(self, text: str) -> str | None:
        """The name of a secret whose value ``text`` holds (the longest), or None."""
        for name, secret in self._secrets:
            if secret in text:
                return name
        return None

