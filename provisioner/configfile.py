"""Loading the daemon's YAML config with errors that name the file, line and field.

An operator fixing a config at 3 a.m. needs every problem at once, each one
pointing at the line to edit, in words rather than validator jargon. So the
loader keeps the line of every YAML node, turns pydantic's error locations
back into those lines, and goes on past the first problem: syntax, structure,
cross-references between sections, and the files the config names.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
import sys
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from messages.scripts import Action
from provisioner.config import Config, Name

#: The five scripts of an LSF / Host Factory provider folder (each may end in ``.sh``).
LSF_SCRIPTS = (
    "getAvailableTemplates",
    "requestMachines",
    "getRequestStatus",
    "requestReturnMachines",
    "getReturnRequests",
)
_TLS_KEYS = ("cert", "key")

Elems = tuple[Any, ...]


@dataclass(frozen=True)
class ConfigIssue:
    """One problem in a config file; ``line`` is None only when the file could not be read."""

    file: str
    line: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class ConfigError(Exception):
    """A config that cannot be used; carries every issue found, in file order."""

    def __init__(self, issues: list[ConfigIssue]) -> None:
        self.issues = sorted(issues, key=lambda i: i.line or 0)
        super().__init__("\n".join(str(i) for i in self.issues))


# --- where things are -------------------------------------------------------


def _dotted(elems: Elems) -> str:
    """``('providers', 1, 'script', 'path')`` -> ``providers[1].script.path``."""
    out = ""
    for e in elems:
        if isinstance(e, int) and not isinstance(e, bool):
            out += f"[{e}]"
        elif isinstance(e, str) and re.fullmatch(r"[A-Za-z0-9_-]+", e):
            out += f".{e}" if out else e
        else:
            out += f"[{e!r}]"
    return out


class _Where:
    """Turns a location in the data into an issue at the line of that node or its nearest parent."""

    def __init__(self, file: str, lines: dict[Elems, int]) -> None:
        self.file = file
        self.lines = lines

    def line(self, elems: Elems) -> int:
        for n in range(len(elems), -1, -1):
            if elems[:n] in self.lines:
                return self.lines[elems[:n]]
        return 1

    def issue(self, elems: Elems, message: str) -> ConfigIssue:
        return ConfigIssue(self.file, self.line(elems), _dotted(elems), message)


# --- YAML with line numbers ---------------------------------------------------

_MERGE_TAG = "tag:yaml.org,2002:merge"


class _MarkedLoader(yaml.SafeLoader):
    """A SafeLoader that notes keys appearing twice in one mapping; YAML keeps the last silently."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        #: id(mapping node) -> [(key, line of the repeat, line of the first)]
        self.duplicates: dict[int, list[tuple[Any, int, int]]] = {}

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    if key in first:
                        self.duplicates.setdefault(id(node), []).append(
                            (key, key_node.start_mark.line + 1, first[key])
                        )
                    else:
                        first[key] = key_node.start_mark.line + 1
                except TypeError:
                    pass  # an unhashable key: the base constructor reports it with its mark
        return super().construct_mapping(node, deep=deep)  # type: ignore[arg-type]


def _index(
    loader: _MarkedLoader, node: yaml.Node, elems: Elems, lines: dict[Elems, int], seen: set[int]
) -> Iterator[tuple[Elems, str]]:
    """Record the line of every key and item below ``node``; yield duplicate-key problems.

    An aliased node is entered once only: a billion-laughs file must not make
    this walk explode, and deeper lookups fall back to the alias's own line.
    """
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key, line, first in loader.duplicates.get(id(node), []):
            yield elems + (key,), f"duplicate key (first at line {first}; YAML would silently keep this one)"
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            lines[elems + (key,)] = key_node.start_mark.line + 1
            yield from _index(loader, value_node, elems + (key,), lines, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[elems + (i,)] = item.start_mark.line + 1
            yield from _index(loader, item, elems + (i,), lines, seen)


def _parse(text: str, file: str) -> tuple[Any, _Where, list[ConfigIssue]]:
    loader = _MarkedLoader(text)
    where = _Where(file, {})
    try:
        node = loader.get_single_node()
        if node is None:
            return None, where, []
        data = loader.construct_document(node)
        where.lines[()] = node.start_mark.line + 1
        dups = list(_index(loader, node, (), where.lines, set()))
        return data, where, [where.issue(e, m) for e, m in dups]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        text = exc.problem or exc.context or "cannot parse"
        if mark is not None:
            text += f" (column {mark.column + 1})"
        if exc.problem and exc.context and exc.context_mark is not None:
            text += f", {exc.context} at line {exc.context_mark.line + 1}"
        line = mark.line + 1 if mark is not None else 1
        return None, where, [ConfigIssue(file, line, "", f"YAML syntax error: {text}")]
    except yaml.YAMLError as exc:
        return None, where, [ConfigIssue(file, 1, "", f"YAML error: {exc}")]
    finally:
        loader.dispose()


# --- the models' types, walked along a location --------------------------------


def _strip(tp: Any) -> Any:
    """Unwrap ``Annotated`` and ``X | None`` down to the type that matters for messages."""
    while True:
        origin = get_origin(tp)
        if origin is typing.Annotated:
            tp = get_args(tp)[0]
            continue
        if origin in (Union, types.UnionType):
            args = [a for a in get_args(tp) if a is not type(None)]
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            if models or len(args) == 1:
                tp = (models or args)[0]
                continue
        return tp


def _type_at(elems: Elems, root: Any = Config) -> Any:
    tp: Any = root
    for e in elems:
        tp = _strip(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(e) if isinstance(e, str) else None
            if field is None:
                return None
            tp = field.annotation
        elif get_origin(tp) is list and isinstance(e, int):
            tp = get_args(tp)[0]
        elif get_origin(tp) is dict:
            tp = get_args(tp)[1]
        else:
            return None
    return _strip(tp)


def _empty_means_default(data: Any, tp: Any) -> None:
    """``policy:`` with every key commented out is YAML null; treat it as the section's defaults."""
    tp = _strip(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(data, dict):
        for name, field in tp.model_fields.items():
            takes_none = type(None) in get_args(field.annotation)
            if name in data and data[name] is None and not field.is_required() and not takes_none:
                del data[name]
            elif name in data:
                _empty_means_default(data[name], field.annotation)
    elif get_origin(tp) is list and isinstance(data, list):
        for item in data:
            _empty_means_default(item, get_args(tp)[0])


# --- ${VAR} expansion -------------------------------------------------------------

_REF = re.compile(r"\$(\$?)\{([^}]*)\}")
_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Far more values than any real config holds; YAML aliases nested on aliases can
#: otherwise expand a small file into billions of them.
MAX_VALUES = 100_000


class _TooBig(Exception):
    pass


class _Expander:
    """Expands ``${VAR}`` in string values (never keys); ``$${`` stands for a literal ``${``."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        #: location -> why its value could not be expanded
        self.problems: dict[Elems, str] = {}
        #: locations whose value came (partly) from the environment: never echoed in errors
        self.from_env: set[Elems] = set()
        self.budget = MAX_VALUES

    def __call__(self, data: Any, elems: Elems = ()) -> Any:
        self.budget -= 1
        if self.budget < 0:
            raise _TooBig
        if isinstance(data, dict):
            return {k: self(v, elems + (k,)) for k, v in data.items()}
        if isinstance(data, list):
            return [self(v, elems + (i,)) for i, v in enumerate(data)]
        if not isinstance(data, str) or "${" not in data:
            return data
        return _REF.sub(lambda m: self._sub(m, elems), data)

    def _sub(self, m: re.Match[str], elems: Elems) -> str:
        if m.group(1):
            return "${" + m.group(2) + "}"
        name = m.group(2)
        if not _VAR.fullmatch(name):
            hint = "use ${NAME}, or $${ for a literal ${"
            self.problems.setdefault(elems, f"bad variable reference ${{{name}}} ({hint})")
            return m.group(0)
        if name not in self.env:
            self.problems.setdefault(elems, f"environment variable {name} is not set")
            return m.group(0)
        self.from_env.add(elems)
        return self.env[name]


# --- pydantic errors in words -------------------------------------------------------

_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "text",
    "dict_type": "a mapping",
    "list_type": "a list",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "path_type": "a path",
}
_BOUNDS = {
    "greater_than_equal": ("ge", "at least"),
    "greater_than": ("gt", "more than"),
    "less_than_equal": ("le", "at most"),
    "less_than": ("lt", "less than"),
}
_NAME_PATTERN = next(m.pattern for m in get_args(Name)[1].metadata if getattr(m, "pattern", None))


def _got(value: Any, hidden: str | None = None) -> str:
    if hidden:
        return hidden
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return "known: " + ", ".join(choices) if choices else ""


def _unknown_field(elems: Elems, root: Any = Config) -> str:
    model = _type_at(elems[:-1], root)
    fields = list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []
    hint = _did_you_mean(str(elems[-1]), fields)
    return f"unknown field ({hint})" if hint else "unknown field"


@dataclass
class _Error:
    elems: Elems
    union_branch: bool
    expected: str | None
    got: str
    message: str


def _locate(loc: tuple[Any, ...], data: Any, missing: bool) -> tuple[Elems, bool, bool]:
    """Map pydantic's ``loc`` onto keys that exist in the data; union-branch tags are dropped."""
    elems: list[Any] = []
    cur, branch, key_error = data, False, False
    for i, part in enumerate(loc):
        if isinstance(cur, dict) and part in cur:
            elems.append(part)
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            elems.append(part)
            cur = cur[part]
        elif part == "[key]":
            key_error = True
        elif missing and i == len(loc) - 1:
            elems.append(part)
        else:
            branch = True
    return tuple(elems), branch, key_error


def _describe_error(err: Mapping[str, Any], data: Any, hidden: set[Elems], root: Any = Config) -> _Error:
    kind = err["type"]
    elems, branch, key_error = _locate(err["loc"], data, kind == "missing")
    value = err.get("input")
    is_url = elems == ("controller", "url")
    if elems in hidden:
        got = _got(value, "a value taken from the environment")
    else:
        got = _got(value, "a value not shown (it may hold credentials)" if is_url else None)
    ctx = err.get("ctx") or {}
    expected = None
    if key_error:
        message = f"keys here must be text, got {got}"
    elif kind == "missing":
        message = "missing required field"
    elif kind in ("extra_forbidden", "invalid_key"):
        message = _unknown_field(elems, root)
    elif kind == "literal_error":
        tp = _type_at(elems, root)
        options = ", ".join(repr(a) for a in get_args(tp)) if get_origin(tp) is Literal else ctx.get("expected")
        message = f"expected one of {options}, got {got}"
        if isinstance(value, bool):
            message += " (YAML reads unquoted yes/no/on/off as true/false: quote the word)"
    elif kind in ("value_error", "assertion_error") and "error" in ctx:
        message = str(ctx["error"])
    elif kind == "string_pattern_mismatch" and is_url:
        scheme = value.split("://", 1)[0] if isinstance(value, str) and "://" in value else None
        shown = f"got scheme {scheme!r}" if scheme is not None else "no scheme"
        message = f"not a controller URL ({shown}; use sqlite:///PATH or etcd://HOST:PORT[,HOST:PORT...])"
    elif kind == "string_pattern_mismatch" and ctx.get("pattern") == _NAME_PATTERN:
        message = (
            f"not a valid name: {got} (letters, digits, '.', '_' and '-', "
            "starting with a letter or digit, at most 63 characters)"
        )
    elif kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        bound = ctx.get(key)
        shown = int(bound) if isinstance(bound, float) and bound.is_integer() else bound
        message = f"must be {words} {shown}, got {got}"
    elif kind in _EXPECTED:
        expected = _EXPECTED[kind]
        message = f"expected {expected}, got {got}"
    else:
        message = str(err.get("msg", kind))
    return _Error(elems, branch, expected, got, message)


def _below(inner: Elems, outer: Elems) -> bool:
    return len(inner) > len(outer) and inner[: len(outer)] == outer


def _validation_issues(
    exc: ValidationError, data: Any, where: _Where, skip: set[Elems], hidden: set[Elems], root: Any = Config
) -> list[ConfigIssue]:
    """Pydantic's errors as issues at their lines; ``root`` is the model the file is loaded as."""
    errors = [_describe_error(e, data, hidden, root) for e in exc.errors(include_url=False)]
    errors = [e for e in errors if e.elems not in skip]
    # A union (``float | dict[str, float]``) fails once per branch; when one branch got
    # deeper into the value, that branch is the one the operator meant.
    errors = [e for e in errors if not (e.union_branch and any(_below(o.elems, e.elems) for o in errors))]
    grouped: dict[Elems, list[_Error]] = {}
    for e in errors:
        grouped.setdefault(e.elems, []).append(e)
    issues = []
    for elems, group in grouped.items():
        if len(group) > 1 and all(e.expected for e in group):
            wanted = " or ".join(dict.fromkeys(e.expected for e in group if e.expected))
            issues.append(where.issue(elems, f"expected {wanted}, got {group[0].got}"))
        else:
            for message in dict.fromkeys(e.message for e in group):
                issues.append(where.issue(elems, message))
    return issues


# --- checks across sections ---------------------------------------------------------


def sqlite_path(url: str) -> Path | None:
    """``sqlite:///var/lib/p/state.db`` -> ``/var/lib/p/state.db``: the path is all after ``sqlite://``."""
    return Path(url[len("sqlite://") :]) if url.startswith("sqlite://") else None


def _listen_problem(listen: str) -> str | None:
    host, _, port = listen.rpartition(":")
    if host and port.isdigit() and 0 < int(port) < 65536:
        return None
    return f"expected HOST:PORT (e.g. 127.0.0.1:8787), got {listen!r}"


def _semantic_issues(cfg: Config, at: _Where) -> list[ConfigIssue]:
    issues: list[ConfigIssue] = []
    kinds: dict[str, str] = {}
    first: dict[str, int] = {}
    actions = list(get_args(Action))
    for i, p in enumerate(cfg.providers):
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
        for action in p.script.timeouts:
            if action not in actions:
                where = ("providers", i, "script", "timeouts", action)
                issues.append(at.issue(where, f"unknown action ({_did_you_mean(action, actions)})"))

    names = list(first)
    served: set[str] = set()
    for j, name in enumerate(cfg.instance.serves):
        if name in served:
            issues.append(at.issue(("instance", "serves", j), f"{name!r} is listed twice"))
        elif name not in kinds:
            issues.append(at.issue(("instance", "serves", j), _no_provider(name, names)))
        served.add(name)

    seen: dict[str, int] = {}
    for k, r in enumerate(cfg.resources):
        if r.name in seen:
            line = at.line(("resources", seen[r.name], "name"))
            message = f"duplicate resource name {r.name!r} (first at line {line})"
            issues.append(at.issue(("resources", k, "name"), message))
        seen.setdefault(r.name, k)
        if r.provider is None:
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

    problem = _listen_problem(cfg.api.listen)
    if problem:
        issues.append(at.issue(("api", "listen"), problem))
    if cfg.api.tls is not None:
        for key in cfg.api.tls:
            if key not in _TLS_KEYS:
                issues.append(at.issue(("api", "tls", key), f"unknown field ({_did_you_mean(key, list(_TLS_KEYS))})"))
        for key in _TLS_KEYS:
            if key not in cfg.api.tls:
                issues.append(at.issue(("api", "tls", key), "missing required field"))
    return issues


def _no_provider(name: str, names: list[str]) -> str:
    hint = _did_you_mean(name, names) if names else "no providers are configured"
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
    """A folder the daemon creates on start: fine if missing, as long as it can be made."""
    if path.exists():
        return None if path.is_dir() else f"not a folder: {path}"
    for parent in path.parents:
        if parent.exists():
            return None if parent.is_dir() else f"cannot create {path}: {parent} is not a folder"
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


def _file_issues(cfg: Config, at: _Where) -> list[ConfigIssue]:
    found: list[tuple[Elems, str | None]] = []
    for i, p in enumerate(cfg.providers):
        script = ("providers", i, "script")
        if p.script.style == "lsf":
            found += [(script + ("path",), m) for m in _lsf_problems(p.script.path)]
        else:
            found.append((script + ("path",), _executable_problem(p.script.path)))
        if p.script.conf_dir is not None:
            found.append((script + ("conf_dir",), _folder_problem(p.script.conf_dir)))
        if p.script.work_dir is not None:
            found.append((script + ("work_dir",), _creatable_problem(p.script.work_dir)))
        if p.env_file is not None:
            found.append((("providers", i, "env_file"), _mode_problem(p.env_file)))
    if cfg.api.tokens is not None:
        found.append((("api", "tokens"), _mode_problem(cfg.api.tokens)))
    for key, path in (cfg.api.tls or {}).items():
        found.append((("api", "tls", key), _readable_problem(path)))
    db = sqlite_path(cfg.controller.url)
    if db is not None:
        problem = f"the database is a folder: {db}" if db.is_dir() else _creatable_problem(db.parent)
        found.append((("controller", "url"), problem))
    if cfg.home is not None:
        found.append((("home",), _creatable_problem(cfg.home)))
    return [at.issue(elems, message) for elems, message in found if message]


# --- relative paths ---------------------------------------------------------------------


def _absolute(cfg: Config, base: Path) -> Config:
    """Resolve relative paths against the config file's folder, so the daemon's cwd never matters."""

    def a(p: Path | None) -> Path | None:
        if p is None:
            return None
        p = p.expanduser()
        return p if p.is_absolute() else Path(os.path.normpath(base / p))

    providers = []
    for p in cfg.providers:
        s = p.script
        script = s.model_copy(update={"path": a(s.path), "conf_dir": a(s.conf_dir), "work_dir": a(s.work_dir)})
        providers.append(p.model_copy(update={"script": script, "env_file": a(p.env_file)}))
    tls = {k: a(v) for k, v in cfg.api.tls.items()} if cfg.api.tls is not None else None
    api = cfg.api.model_copy(update={"tokens": a(cfg.api.tokens), "tls": tls})
    return cfg.model_copy(update={"providers": providers, "api": api, "home": a(cfg.home)})


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

    data, where, issues = _parse(text, file)
    if issues and data is None:
        raise ConfigError(issues)
    if data is None:
        message = "the file is empty (expected sections such as instance:, controller:, providers:)"
        raise ConfigError([ConfigIssue(file, 1, "", message)])
    if not isinstance(data, dict):
        got = _got(data)
        message = f"the top level must be a mapping of sections (instance:, controller:, ...), got {got}"
        raise ConfigError([where.issue((), message)])

    expand = _Expander(os.environ)
    try:
        data = expand(data)
    except _TooBig:
        raise ConfigError([where.issue((), f"more than {MAX_VALUES} values once YAML aliases are expanded")]) from None
    issues += [where.issue(elems, message) for elems, message in expand.problems.items()]
    _empty_means_default(data, Config)

    try:
        cfg = Config.model_validate(data)
    except ValidationError as exc:
        issues += _validation_issues(exc, data, where, set(expand.problems), expand.from_env)
        raise ConfigError(issues) from None

    cfg = _absolute(cfg, Path(os.path.abspath(path)).parent)
    issues += _semantic_issues(cfg, where)
    if check_files:
        issues += _file_issues(cfg, where)
    if issues:
        raise ConfigError(issues)
    return cfg


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


def _summary(cfg: Config, file: str) -> list[str]:
    served = set(cfg.instance.serves)
    api = cfg.api
    lines = [
        f"{file}: OK",
        f"  instance    {cfg.instance.id} (planner: {'yes' if cfg.instance.planner else 'no'})",
        f"  controller  {public_url(cfg.controller.url)}",
        f"  api         {api.listen} (tls: {'yes' if api.tls else 'no'}, tokens: {'yes' if api.tokens else 'no'})",
    ]
    width = max((len(p.name) for p in cfg.providers), default=0)
    label = "  providers   "
    for p in cfg.providers:
        where = "served here" if p.name in served else "served by another instance"
        lines.append(f"{label}{p.name:<{width}}  {p.kind:<5}  {p.script.style:<3}  {where}")
        label = " " * len(label)
    if not cfg.providers:
        lines.append(f"{label}none")
    label = "  resources   "
    width = max((len(r.name) for r in cfg.resources), default=0)
    for r in cfg.resources:
        how = f"elastic, base {r.base}, provider {r.provider}" if r.elastic else f"base {r.base}"
        lines.append(f"{label}{r.name:<{width}}  {how}")
        label = " " * len(label)
    if not cfg.resources:
        lines.append(f"{label}none")
    return lines


def check_config_main(
    path: str, out: TextIO | None = None, err: TextIO | None = None, *, check_files: bool = True
) -> int:
    """``provisioner check-config FILE``: every issue on ``err`` and 2, or a summary on ``out`` and 0.

    ``out`` and ``err`` default to the streams current at call time, so a test's capture sees them.
    """
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        cfg = load_config(Path(path), check_files=check_files)
    except ConfigError as exc:
        for issue in exc.issues:
            print(issue, file=err)
        return 2
    for line in _summary(cfg, path):
        print(line, file=out)
    return 0
