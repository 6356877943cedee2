"""Loading the daemon's config file: every problem at once, each at its line.

Syntax, structure (through ``config.located``), cross-references between
sections, and the files the config names: a script that is not executable,
an env_file readable by others, a folder that cannot be made. A file with
structural problems is still checked across sections and for its files, as
far as its valid parts go (``_Parts``), so one pass reports everything.

Files are checked for the providers this instance serves (``instance.serves``)
only: every instance may read the same file, and a provider served elsewhere
runs its scripts on another host.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast, get_args

from pydantic import TypeAdapter, ValidationError

from config.hostlists import HostlistError, expand_hostlist
from config.located import (
    MAX_VALUES,
    ConfigError,
    ConfigIssue,
    Elems,
    Expander,
    TooBig,
    Where,
    did_you_mean,
    empty_means_default,
    parse_located,
    shown,
    validation_issues,
)
from config.models import (
    PERSISTENT_KEYS,
    ApiConfig,
    Config,
    ControllerConfig,
    InstanceConfig,
    PolicyConfig,
    ProviderConfig,
    ResourceConfig,
    SlurmConfig,
)
from messages.scripts import Action

LSF_SCRIPTS = (
    "getAvailableTemplates",
    "requestMachines",
    "getRequestStatus",
    "requestReturnMachines",
    "getReturnRequests",
)
_TLS_KEYS = ("cert", "key")

# --- the daemon's own wording -------------------------------------------------------

_URL: Elems = ("controller", "url")


def _reword(kind: str, elems: Elems, value: Any) -> str | None:
    """A controller URL that does not parse: say which schemes work, and never echo it (it may hold a password)."""
    if kind != "string_pattern_mismatch" or elems != _URL:
        return None
    scheme = value.split("://", 1)[0] if isinstance(value, str) and "://" in value else None
    got = f"got scheme {scheme!r}" if scheme is not None else "no scheme"
    return f"not a controller URL ({got}; use sqlite:///PATH or etcd://HOST:PORT[,HOST:PORT...])"


# --- checks across sections ---------------------------------------------------------


def sqlite_path(url: str) -> Path | None:
    """``sqlite:///var/lib/p/state.db`` -> ``/var/lib/p/state.db``: the path is all after ``sqlite://``."""
    return Path(url[len("sqlite://") :]) if url.startswith("sqlite://") else None


def _listen_problem(listen: str) -> str | None:
    host, _, port = listen.rpartition(":")
    if host and port.isdigit() and 0 < int(port) < 65536:
        return None
    return f"expected HOST:PORT (e.g. 127.0.0.1:8787), got {listen!r}"


@dataclass
class _Parts:
    """What the checks across sections and of files read: each section of the file, or None where it is not
    valid (then its own problems are reported already, and the checks leave it out).

    A valid file's parts are its config's; a file with structural problems gives the parts that are valid
    by themselves (``partial``), so a ``serves`` typo is reported with a bad duration, not after it.
    """

    #: (position in the file's list, provider) for every valid entry
    providers: list[tuple[int, ProviderConfig]]
    #: the names of every provider entry that has one, valid or not: a reference to a provider whose
    #: entry has some other problem is not reported as naming no provider
    named: set[str]
    resources: list[tuple[int, ResourceConfig]]
    instance: InstanceConfig | None
    #: the providers this instance serves, as far as they are known
    serves: list[str]
    controller: ControllerConfig | None
    api: ApiConfig | None
    slurm: SlurmConfig | None
    home: Path | None
    policy: PolicyConfig | None = None

    @classmethod
    def of(cls, cfg: Config) -> _Parts:
        return cls(providers=list(enumerate(cfg.providers)), named={p.name for p in cfg.providers},
                   resources=list(enumerate(cfg.resources)), instance=cfg.instance, serves=cfg.instance.serves,
                   controller=cfg.controller, api=cfg.api, slurm=cfg.slurm, home=cfg.home, policy=cfg.policy)

    @classmethod
    def partial(cls, data: dict[Any, Any]) -> _Parts:
        fields = Config.model_fields

        def valid(key: str) -> Any:
            if key not in data:
                field = fields[key]
                return None if field.is_required() else field.get_default(call_default_factory=True)
            try:
                # A model's field always has its annotation; pydantic types it optional for other uses.
                return TypeAdapter[Any](cast(Any, fields[key].annotation)).validate_python(data[key])
            except ValidationError:
                return None

        def entries(key: str, model: type[Any]) -> list[tuple[int, Any]]:
            out = []
            for i, raw in enumerate(listed if isinstance(listed := data.get(key), list) else []):
                try:
                    out.append((i, model.model_validate(raw)))
                except ValidationError:
                    pass
            return out

        raw_providers = listed if isinstance(listed := data.get("providers"), list) else []
        named = {p["name"] for p in raw_providers if isinstance(p, dict) and isinstance(p.get("name"), str)}
        instance = valid("instance")
        raw_instance = given if isinstance(given := data.get("instance"), dict) else {}
        raw_serves = listed if isinstance(listed := raw_instance.get("serves"), list) else []
        serves = instance.serves if instance is not None else [n for n in raw_serves if isinstance(n, str)]
        return cls(providers=entries("providers", ProviderConfig), named=named,
                   resources=entries("resources", ResourceConfig), instance=instance, serves=serves,
                   controller=valid("controller"), api=valid("api"), slurm=valid("slurm"), home=valid("home"),
                   policy=valid("policy"))


def _semantic_issues(cfg: _Parts, at: Where) -> list[ConfigIssue]:
    issues: list[ConfigIssue] = []
    kinds: dict[str, str] = {}
    first: dict[str, int] = {}
    actions = list(get_args(Action))
    for i, p in cfg.providers:
        if p.name in first:
            line = at.line(("providers", first[p.name], "name"))
            message = f"duplicate provider name {p.name!r} (first at line {line})"
            issues.append(at.issue(("providers", i, "name"), message))
        else:
            first[p.name] = i
            kinds[p.name] = p.kind
        if p.kind == "units" and p.script.style == "lsf":
            message = "style 'lsf' serves hosts only; a units provider needs style 'v2'"
            issues.append(at.issue(("providers", i, "script", "style"), message))
        if p.script.mode == "persistent" and p.script.style != "v2":
            message = f"mode 'persistent' needs style 'v2' (style {p.script.style!r} runs one process per call)"
            issues.append(at.issue(("providers", i, "script", "mode"), message))
        if p.script.mode != "persistent":
            for key in PERSISTENT_KEYS:
                if key in p.script.model_fields_set:
                    message = "only used with mode: persistent (this provider runs one process per call)"
                    issues.append(at.issue(("providers", i, "script", key), message))
        if p.script.style == "v2" and p.script.work_dir is not None:
            message = ("only used with style: lsf (its plugin's PRO_DATA_DIR); a v2 script is given no work "
                       "folder: name its state folder in its env_file")
            issues.append(at.issue(("providers", i, "script", "work_dir"), message))
        if p.script.secrets and p.env_file is None:
            message = "names variables of the env_file, and this provider has no env_file"
            issues.append(at.issue(("providers", i, "script", "secrets"), message))
        if p.policy.warm and p.kind != "hosts":
            message = "warm capacity keeps hosts: a units provider has none to keep"
            issues.append(at.issue(("providers", i, "policy", "warm"), message))
        for action in p.script.timeouts:
            if action not in actions:
                where = ("providers", i, "script", "timeouts", action)
                issues.append(at.issue(where, f"unknown action ({did_you_mean(action, actions)})"))

    names = sorted(set(first) | cfg.named, key=lambda n: (n not in first, first.get(n, 0), n))
    served: set[str] = set()
    for j, name in enumerate(cfg.serves if cfg.instance is not None else []):
        if name in served:
            issues.append(at.issue(("instance", "serves", j), f"{name!r} is listed twice"))
        elif name not in kinds and name not in cfg.named:
            issues.append(at.issue(("instance", "serves", j), _no_provider(name, names)))
        served.add(name)

    seen: dict[str, int] = {}
    for k, r in cfg.resources:
        if r.name in seen:
            line = at.line(("resources", seen[r.name], "name"))
            message = f"duplicate resource name {r.name!r} (first at line {line})"
            issues.append(at.issue(("resources", k, "name"), message))
        seen.setdefault(r.name, k)
        if r.provider is None or (r.provider not in kinds and r.provider in cfg.named):
            continue
        if r.provider not in kinds:
            issues.append(at.issue(("resources", k, "provider"), _no_provider(r.provider, names)))
        elif kinds[r.provider] != "units":
            issues.append(
                at.issue(
                    ("resources", k, "provider"),
                    f"provider {r.provider!r} is of kind {kinds[r.provider]}; a resource needs a units provider",
                )
            )

    if cfg.slurm is not None:
        issues += _slurm_issues(cfg.slurm, kinds, cfg.named, names, at)
        issues += _warm_named_issues(cfg.slurm, cfg.policy, cfg.providers, at)
        elastic = {r.name for _, r in cfg.resources if r.elastic}
        mapped: set[str] = set()
        for k, lic in enumerate(cfg.slurm.licenses):
            if lic.resource not in elastic:
                known = ", ".join(sorted(elastic)) or "none is declared"
                issues.append(at.issue(("slurm", "licenses", k, "resource"),
                                       f"no elastic resource named {lic.resource!r} in resources (elastic: {known})"))
            if lic.license in mapped:
                issues.append(at.issue(("slurm", "licenses", k, "license"), f"{lic.license} is mapped twice"))
            mapped.add(lic.license)

    if cfg.api is None:
        return issues
    problem = _listen_problem(cfg.api.listen)
    if problem:
        issues.append(at.issue(("api", "listen"), problem))
    if cfg.api.tls is not None:
        for key in cfg.api.tls:
            if key not in _TLS_KEYS:
                issues.append(at.issue(("api", "tls", key), f"unknown field ({did_you_mean(key, list(_TLS_KEYS))})"))
        for key in _TLS_KEYS:
            if key not in cfg.api.tls:
                issues.append(at.issue(("api", "tls", key), "missing required field"))
    return issues


def _slurm_issues(slurm: SlurmConfig, kinds: dict[str, str], named: set[str], names: list[str],
                  at: Where) -> list[ConfigIssue]:
    """Each node set's hostlist parses, names nodes no other set names, and is made by a hosts provider."""
    issues: list[ConfigIssue] = []
    owner: dict[str, int] = {}
    for k, ns in enumerate(slurm.nodes):
        try:
            nodes = expand_hostlist(ns.names)
        except HostlistError as exc:
            issues.append(at.issue(("slurm", "nodes", k, "names"), str(exc)))
            nodes = []
        for node in nodes:
            if node in owner:
                line = at.line(("slurm", "nodes", owner[node], "names"))
                issues.append(at.issue(("slurm", "nodes", k, "names"),
                                       f"node {node} is already in the node set at line {line}"))
                break
            owner[node] = k
        if ns.provider not in kinds and ns.provider in named:
            continue  # its entry has problems of its own
        if ns.provider not in kinds:
            issues.append(at.issue(("slurm", "nodes", k, "provider"), _no_provider(ns.provider, names)))
        elif kinds[ns.provider] != "hosts":
            issues.append(at.issue(("slurm", "nodes", k, "provider"),
                                   f"provider {ns.provider!r} is of kind {kinds[ns.provider]}; nodes need a hosts "
                                   "provider"))
    return issues


def _warm_named_issues(slurm: SlurmConfig, policy: PolicyConfig | None, providers: list[tuple[int, ProviderConfig]],
                       at: Where) -> list[ConfigIssue]:
    """Warm capacity covers no template of Slurm's power-saving nodes: Slurm resumes and suspends them by
    name, and a host the daemon makes on its own has no name, so it never joins (docs/slurm.md)."""
    if not slurm.nodes:
        return []
    issues: list[ConfigIssue] = []
    why = ("Slurm resumes and suspends those nodes by name, and a warm host has none, so it would never join: "
           "keep them up with slurm.conf's SuspendExcNodes")
    if policy is not None and (policy.min_idle or policy.min_hosts):
        key = "min_idle" if policy.min_idle else "min_hosts"
        ns = slurm.nodes[0]
        issues.append(at.issue(("policy", key), (
            f"warm capacity of every hosts provider covers {ns.provider}/{ns.template}, the template of Slurm's "
            f"power-saving nodes {ns.names} (slurm.nodes, line {at.line(('slurm', 'nodes', 0, 'names'))}); {why}, "
            "or give it to a provider of dynamic nodes (providers[].policy.warm)")))
    for i, p in providers:
        for j, rule in enumerate(p.policy.warm):
            if not (rule.min_idle or rule.min_hosts):
                continue
            for k, ns in enumerate(slurm.nodes):
                if ns.provider == p.name and rule.template in (None, ns.template):
                    issues.append(at.issue(("providers", i, "policy", "warm", j), (
                        f"warm capacity covers {ns.provider}/{ns.template}, the template of Slurm's power-saving "
                        f"nodes {ns.names} (slurm.nodes[{k}], line {at.line(('slurm', 'nodes', k, 'names'))}); "
                        f"{why}, or name another template")))
                    break
    return issues


def _no_provider(name: str, names: list[str]) -> str:
    hint = did_you_mean(name, names) if names else "no providers are configured"
    return f"no provider named {name!r} ({hint})"


# --- checks of the files the config names --------------------------------------------


def _mode_problem(path: Path) -> str | None:
    """A file holding credentials must be readable by its owner only."""
    problem = _readable_problem(path)
    if problem:
        return problem
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        return f"mode {mode:04o} is too open, use 0600 (chmod 600 {path})"
    return None


def _readable_problem(path: Path) -> str | None:
    if not path.exists():
        return f"no such file: {path}"
    if not path.is_file():
        return f"not a file: {path}"
    if not os.access(path, os.R_OK):
        return f"cannot read {path} (permission denied)"
    return None


def _executable_problem(path: Path) -> str | None:
    if not path.exists():
        return f"no such file: {path}"
    if not path.is_file():
        return f"not a file: {path} (style v2 runs one executable)"
    if not os.access(path, os.X_OK):
        return f"not executable: {path} (chmod +x)"
    return None


def _folder_problem(path: Path) -> str | None:
    if not path.exists():
        return f"no such folder: {path}"
    if not path.is_dir():
        return f"not a folder: {path}"
    return None


def _creatable_problem(path: Path) -> str | None:
    """A folder the daemon writes in and creates when missing: fine if missing, as long as it can be made
    (its nearest existing parent is a folder the daemon's user may write in)."""
    if path.exists():
        if not path.is_dir():
            return f"not a folder: {path}"
        return None if os.access(path, os.W_OK | os.X_OK) else f"not writable: {path} (permission denied)"
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                return f"cannot create {path}: {parent} is not a folder"
            if not os.access(parent, os.W_OK | os.X_OK):
                return f"cannot create {path}: {parent} is not writable (permission denied)"
            return None
    return None


def _lsf_problems(folder: Path) -> list[str]:
    if not folder.exists():
        return [f"no such file: {folder}"]
    if not folder.is_dir():
        return [f"not a folder: {folder} (style lsf needs the folder holding the five scripts)"]
    problems = []
    for name in LSF_SCRIPTS:
        found = [folder / n for n in (name, name + ".sh") if (folder / n).is_file()]
        if not found:
            problems.append(f"missing script {name} (or {name}.sh) in {folder}")
        elif not any(os.access(f, os.X_OK) for f in found):
            problems.append(f"not executable: {found[0]} (chmod +x)")
    return problems


def _file_issues(cfg: _Parts, at: Where) -> list[ConfigIssue]:
    """The files of the providers this instance serves, its API's and its own; a provider served by another
    instance runs its scripts on that instance's host, which checks them."""
    found: list[tuple[Elems, str | None]] = []
    served = set(cfg.serves)
    for i, p in cfg.providers:
        if p.name not in served:
            continue
        script = ("providers", i, "script")
        if p.script.style == "lsf":
            found += [(script + ("path",), m) for m in _lsf_problems(p.script.path)]
        else:
            found.append((script + ("path",), _executable_problem(p.script.path) if p.script.path.is_absolute()
                          else f"{p.script.path}: not found on PATH nor beside the daemon's Python (a bare name "
                               "is looked up there; give a full path otherwise)"))
        if p.script.conf_dir is not None:
            found.append((script + ("conf_dir",), _folder_problem(p.script.conf_dir)))
        if p.script.work_dir is not None:
            found.append((script + ("work_dir",), _creatable_problem(p.script.work_dir)))
        if p.env_file is not None:
            found.append((("providers", i, "env_file"), _mode_problem(p.env_file)))
    if cfg.api is not None and cfg.api.tokens is not None:
        found.append((("api", "tokens"), _mode_problem(cfg.api.tokens)))
    for key, path in ((cfg.api.tls if cfg.api is not None else None) or {}).items():
        found.append((("api", "tls", key), _readable_problem(path)))
    db = sqlite_path(cfg.controller.url) if cfg.controller is not None else None
    if db is not None:
        problem = f"the database is a folder: {db}" if db.is_dir() else _creatable_problem(db.parent)
        found.append((("controller", "url"), problem))
    if cfg.home is not None:
        found.append((("home",), _creatable_problem(cfg.home)))
    return [at.issue(elems, message) for elems, message in found if message]


# --- relative paths ---------------------------------------------------------------------


class _Absolute:
    """Resolves relative paths against the config file's folder, so the daemon's cwd never matters."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def __call__(self, p: Path | None) -> Path | None:
        if p is None:
            return None
        p = p.expanduser()
        return p if p.is_absolute() else Path(os.path.normpath(self.base / p))

    def command(self, p: Path) -> Path:
        """A v2 script given by a bare name (``provisioner-ec2``) that is not in the config's folder is
        looked up on the daemon's PATH, as a shell would, then beside the running interpreter (the
        installed providers sit there, also when ``.venv/bin/provisioner`` runs without the venv on
        PATH); one not found stays bare, and the file checks say so."""
        local = self(p)
        if os.sep in str(p) or str(p).startswith("~") or (local is not None and local.exists()):
            return local  # type: ignore[return-value]
        found = shutil.which(str(p)) or shutil.which(str(p), path=os.path.dirname(sys.executable))
        return Path(found) if found else p

    def provider(self, p: ProviderConfig) -> ProviderConfig:
        s = p.script
        path = self.command(s.path) if s.style == "v2" else self(s.path)
        script = s.model_copy(update={"path": path, "conf_dir": self(s.conf_dir), "work_dir": self(s.work_dir)})
        return p.model_copy(update={"script": script, "env_file": self(p.env_file)})

    def api(self, api: ApiConfig) -> ApiConfig:
        tls = {k: self(v) for k, v in api.tls.items()} if api.tls is not None else None
        return api.model_copy(update={"tokens": self(api.tokens), "tls": tls})

    def parts(self, parts: _Parts) -> _Parts:
        parts.providers = [(i, self.provider(p)) for i, p in parts.providers]
        parts.api = self.api(parts.api) if parts.api is not None else None
        parts.home = self(parts.home)
        return parts


def _absolute(cfg: Config, base: Path) -> Config:
    """Resolve relative paths against the config file's folder, so the daemon's cwd never matters."""
    a = _Absolute(base)
    return cfg.model_copy(update={"providers": [a.provider(p) for p in cfg.providers], "api": a.api(cfg.api),
                                  "home": a(cfg.home)})


# --- entry points -----------------------------------------------------------------------


def load_config(path: Path, *, check_files: bool = True) -> Config:
    """Load, validate and cross-check a config file; raise ``ConfigError`` with every issue found.

    Relative paths come back absolute (against the file's folder); ``${VAR}`` is
    expanded from the environment. ``check_files=False`` touches no file but the
    config itself (for checking a config on another host than the one it is for).
    """
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        message = f"not UTF-8 text ({exc.reason} at byte {exc.start})"
        raise ConfigError([ConfigIssue(file, None, "", message)]) from None
    except OSError as exc:
        raise ConfigError([ConfigIssue(file, None, "", f"cannot read: {exc.strerror or exc}")]) from None

    data, where, issues = parse_located(text, file)
    if issues and data is None:
        raise ConfigError(issues)
    if data is None:
        message = "the file is empty (expected sections such as instance:, controller:, providers:)"
        raise ConfigError([ConfigIssue(file, 1, "", message)])
    if not isinstance(data, dict):
        got = shown(data)
        message = f"the top level must be a mapping of sections (instance:, controller:, ...), got {got}"
        raise ConfigError([where.issue((), message)])

    expand = Expander(os.environ)
    try:
        data = expand(data)
    except TooBig:
        raise ConfigError([where.issue((), f"more than {MAX_VALUES} values once YAML aliases are expanded")]) from None
    issues += [where.issue(elems, message) for elems, message in expand.problems.items()]
    empty_means_default(data, Config)

    base = Path(os.path.abspath(path)).parent
    try:
        cfg = Config.model_validate(data)
    except ValidationError as exc:
        hidden = {elems: "a value taken from the environment" for elems in expand.from_env}
        hidden.setdefault(_URL, "a value not shown (it may hold credentials)")
        issues += validation_issues(exc, data, where, Config, skip=set(expand.problems), hidden=hidden,
                                    reword=_reword)
        # The rest of the file is checked all the same, as far as its valid parts go: one pass says all.
        parts = _Absolute(base).parts(_Parts.partial(data))
        issues += _semantic_issues(parts, where)
        if check_files:
            issues += _file_issues(parts, where)
        raise ConfigError(_once(issues)) from None

    cfg = _absolute(cfg, base)
    parts = _Parts.of(cfg)
    issues += _semantic_issues(parts, where)
    if check_files:
        issues += _file_issues(parts, where)
    if issues:
        raise ConfigError(issues)
    return cfg


def _once(issues: list[ConfigIssue]) -> list[ConfigIssue]:
    """Each issue once: a problem found by the structure and again across sections is one problem."""
    return list(dict.fromkeys(issues))


def public_url(url: str) -> str:
    """The controller URL without anything that could be a credential: scheme and hosts (or the sqlite file)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return scheme
    if scheme == "sqlite":
        return url.split("?", 1)[0]
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0]
    hosts = ",".join(h.rpartition("@")[2] for h in netloc.split(","))
    return f"{scheme}://{hosts}"

