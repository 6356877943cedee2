"""YAML with line numbers, and pydantic's errors turned into words at those lines.

An operator fixing a file at 3 a.m. needs every problem at once, each one
pointing at the line to edit, in words rather than validator jargon. So the
reader keeps the line of every YAML node, turns pydantic's error locations
back into those lines, and goes on past the first problem. Every file the
project reads from people (the daemon's config, the simulator's, traces,
demand) is read with it, against its own root model.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from config.values import Name
from messages.demand import Name as HostName

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


def dotted(elems: Elems) -> str:
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


class Where:
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
        return ConfigIssue(self.file, self.line(elems), dotted(elems), message)


# --- YAML with line numbers ---------------------------------------------------

_MERGE_TAG = "tag:yaml.org,2002:merge"


#: libyaml's parser where PyYAML was built with it (a thousand providers' file parses some 10 times faster),
#: else PyYAML's own: both mark every node with its line.
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _MarkedLoader(_SafeLoader):  # type: ignore[misc,valid-type]
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


def parse_located(text: str, file: str) -> tuple[Any, Where, list[ConfigIssue]]:
    loader = _MarkedLoader(text)
    where = Where(file, {})
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


def _strip(tp: Any, value: Any = None) -> Any:
    """Unwrap ``Annotated`` and ``X | None`` down to the type that matters for messages; of a union of
    models, the one ``value`` (the data there, when known) is tagged as (``kind: bundles``), else the first."""
    while True:
        origin = get_origin(tp)
        if origin is typing.Annotated:
            tp = get_args(tp)[0]
            continue
        if origin in (Union, types.UnionType):
            args = [a for a in get_args(tp) if a is not type(None)]
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            if models or len(args) == 1:
                tp = next((m for m in models if _tagged(m, value)), (models or args)[0])
                continue
        return tp


def _tagged(model: type[BaseModel], value: Any) -> bool:
    """Whether ``value`` carries one of ``model``'s tags: a field of a single literal it gives that literal."""
    if not isinstance(value, dict):
        return False
    for name, field in model.model_fields.items():
        options = get_args(field.annotation) if get_origin(field.annotation) is Literal else ()
        if len(options) == 1 and name in value:
            return bool(value[name] == options[0])
    return False


def type_at(elems: Elems, root: Any, data: Any = None) -> Any:
    """The type at ``elems`` of a ``root`` model; ``data``, the value validated, picks union members by tag."""
    tp: Any = root
    for e in elems:
        tp = _strip(tp, data)
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
        data = data.get(e) if isinstance(data, dict) else (
            data[e] if isinstance(data, list) and isinstance(e, int) and 0 <= e < len(data) else None)
    return _strip(tp, data)


def empty_means_default(data: Any, tp: Any) -> None:
    """``policy:`` with every key commented out is YAML null; treat it as the section's defaults."""
    tp = _strip(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(data, dict):
        for name, field in tp.model_fields.items():
            takes_none = type(None) in get_args(field.annotation)
            if name in data and data[name] is None and not field.is_required() and not takes_none:
                del data[name]
            elif name in data:
                empty_means_default(data[name], field.annotation)
    elif get_origin(tp) is list and isinstance(data, list):
        for item in data:
            empty_means_default(item, get_args(tp)[0])


# --- ${VAR} expansion -------------------------------------------------------------

_REF = re.compile(r"\$(\$?)\{([^}]*)\}")
_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Far more values than any real config holds; YAML aliases nested on aliases can
#: otherwise expand a small file into billions of them.
MAX_VALUES = 100_000


class TooBig(Exception):
    pass


class Expander:
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
            raise TooBig
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
#: Patterns with a name, in words: what the scheduler names hosts and items with (``messages.demand.Name``).
_PATTERNS = {
    next(m.pattern for m in get_args(HostName)[1].metadata if getattr(m, "pattern", None)):
        ("name", "letters, digits, '.', '_', ':', '@', '/' and '-', starting with a letter or digit"),
}


def shown(value: Any, hidden: str | None = None) -> str:
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


def did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return "known: " + ", ".join(choices) if choices else ""


def _unknown_field(elems: Elems, root: Any, data: Any = None) -> str:
    model = type_at(elems[:-1], root, data)
    fields = list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []
    hint = did_you_mean(str(elems[-1]), fields)
    return f"unknown field ({hint})" if hint else "unknown field"


@dataclass
class Described:
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


#: A file's own wording for some errors: given the error's kind, where it is and the value, the
#: message to give, or None to use the general one (the daemon explains a bad controller URL).
Reword = Callable[[str, Elems, Any], "str | None"]


def describe_error(err: Mapping[str, Any], data: Any, hidden: Mapping[Elems, str], root: Any,
                   reword: Reword | None = None) -> Described:
    """One pydantic error in words. ``hidden``: locations whose value is never echoed, and what to say instead."""
    kind = err["type"]
    elems, branch, key_error = _locate(err["loc"], data, kind == "missing")
    ctx = err.get("ctx") or {}
    if kind in ("union_tag_invalid", "union_tag_not_found") and isinstance(ctx.get("discriminator"), str):
        elems += (ctx["discriminator"].strip("'"),)  # the tag's own field: ``kind``
    value = err.get("input")
    got = shown(value, hidden.get(elems))
    special = reword(kind, elems, value) if reword is not None else None
    expected = None
    if special is not None:
        message = special
    elif key_error:
        message = f"keys here must be text, got {got}"
    elif kind == "missing":
        message = "missing required field"
    elif kind in ("extra_forbidden", "invalid_key"):
        message = _unknown_field(elems, root, data)
    elif kind == "literal_error":
        tp = type_at(elems, root, data)
        options = ", ".join(repr(a) for a in get_args(tp)) if get_origin(tp) is Literal else ctx.get("expected")
        message = f"expected one of {options}, got {got}"
        if isinstance(value, bool):
            message += " (YAML reads unquoted yes/no/on/off as true/false: quote the word)"
    elif kind in ("value_error", "assertion_error") and "error" in ctx:
        message = str(ctx["error"])
    elif kind == "string_pattern_mismatch" and ctx.get("pattern") == _NAME_PATTERN:
        message = (
            f"not a valid name: {got} (letters, digits, '.', '_' and '-', "
            "starting with a letter or digit, at most 63 characters)"
        )
    elif kind == "string_pattern_mismatch" and ctx.get("pattern") in _PATTERNS:
        what, words = _PATTERNS[ctx["pattern"]]
        message = f"not a valid {what}: {got} ({words})"
    elif kind == "string_pattern_mismatch":
        message = f"not valid: {got} (must match {ctx.get('pattern')})"
    elif kind in ("string_too_long", "string_too_short") and isinstance(value, str):
        words = "at most" if kind == "string_too_long" else "at least"
        limit = ctx.get("max_length" if kind == "string_too_long" else "min_length")
        message = ("must not be empty" if kind == "string_too_short" and not value
                   else f"must be {words} {limit} characters, got {len(value)}" + (f" ({got})" if value else ""))
    elif kind in ("too_short", "too_long") and isinstance(ctx.get("actual_length"), int):
        n, words = (ctx.get("min_length"), "at least") if kind == "too_short" else (ctx.get("max_length"), "at most")
        actual = ctx["actual_length"]
        message = ("must not be empty" if kind == "too_short" and actual == 0
                   else f"must have {words} {n} entries, got {actual}")
    elif kind == "union_tag_invalid":
        message = f"expected one of {ctx.get('expected_tags')}, got {shown(ctx.get('tag'))}"
    elif kind == "union_tag_not_found":
        message = "missing required field"
    elif kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        bound = ctx.get(key)
        limit = int(bound) if isinstance(bound, float) and bound.is_integer() else bound
        message = f"must be {words} {limit}, got {got}"
    elif kind in _EXPECTED:
        expected = _EXPECTED[kind]
        message = f"expected {expected}, got {got}"
    else:
        message = str(err.get("msg", kind))
        if not isinstance(value, (dict, list)) and "input" in err:
            message += f", got {got}"
    return Described(elems, branch, expected, got, message)


def _below(inner: Elems, outer: Elems) -> bool:
    return len(inner) > len(outer) and inner[: len(outer)] == outer


def _meant(errors: list[Described]) -> list[Described]:
    """A union (``float | dict[str, float]``) fails once per branch; when one branch got deeper into
    the value, that branch is the one the writer meant."""
    return [e for e in errors if not (e.union_branch and any(_below(o.elems, e.elems) for o in errors))]


def labelled(elems: Elems, data: Any) -> str:
    """``dotted(elems)``, the list entry it is in named by its ``id`` or ``name``: ``items[3] (id 'gpu').count``."""
    cur, at, label = data, 0, ""
    for i, e in enumerate(elems):
        if isinstance(cur, list) and isinstance(e, int) and not isinstance(e, bool) and 0 <= e < len(cur):
            cur = cur[e]
            key = next((k for k in ("id", "name") if isinstance(cur, dict) and isinstance(cur.get(k), str)), None)
            if key is not None:
                at, label = i + 1, f" ({key} {shown(cur[key])})"
        elif isinstance(cur, dict) and e in cur:
            cur = cur[e]
        else:
            break
    if not label:
        return dotted(elems)
    tail = dotted(elems[at:])
    return dotted(elems[:at]) + label + (tail if not tail or tail.startswith("[") else "." + tail)


def one_line(exc: ValidationError, data: Any = None, root: Any = None, *, where: Where | None = None,
             file: str = "", named: Mapping[str, str] | None = None, hidden: Mapping[Elems, str] | None = None,
             reword: Reword | None = None) -> str:
    """Pydantic's first error as the one line a command prints: the place, what is wrong, the value.

    ``data`` is what was validated (None: a model built from arguments, whose error locations are the
    field names themselves) and ``root`` its model. ``where``, when the data came from a file read with
    ``parse_located``, puts its file and line first (``file``: the file alone, its lines unknown). A
    list entry is named by its id or name too, and the count of further problems ends the line:
    ``demand.json:7: items[3] (id 'gpu').count: must be at least 0, got -1 (2 more)``. ``named``
    calls a top-level field by what the user gave it as (``{"older_than": "--older-than"}``);
    ``hidden`` and ``reword`` as for ``describe_error``. Never pydantic's own dump, its type tags or
    its URL.
    """
    raw = exc.errors(include_url=False)
    described = []
    for err in raw:
        e = describe_error(err, data, hidden or {}, root, reword)
        if data is None:
            e.elems = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        described.append(e)
    errors = _in_words(_meant(described) or described)
    elems, message = errors[0]
    at = elems
    if elems and isinstance(elems[-1], str) and message.startswith(f"{elems[-1]}."):
        elems = elems[:-1]  # the message names the key itself (``select.ncpus: >= needs a number``)
    path = labelled(elems, data)
    if named and elems and elems[0] in named:
        rest = dotted(elems[1:])
        path = named[elems[0]] + (rest if not rest or rest.startswith("[") else "." + rest)
    place = f"{where.file}:{where.line(at)}: " if where is not None else f"{file}: " if file else ""
    more = f" ({len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{place}{path + ': ' if path else ''}{message}{more}"


def in_words(errors: Iterable[Mapping[str, Any]], data: Any, root: Any, *,
             hidden: Mapping[Elems, str] | None = None, reword: Reword | None = None) -> list[tuple[Elems, str, str]]:
    """Pydantic's errors (``ValidationError.errors()``, their locations within ``data``) in words, one per
    problem: ``(elems, place, message)``. ``elems`` is where in ``data`` the problem is, without union tags;
    ``place`` says it for people, a list entry named by its id or name (``items[0] (id 'gpu').count``, as
    ``one_line`` says it). ``root`` is ``data``'s model (None when unknown: the messages are a little
    plainer); ``hidden`` and ``reword`` as for ``describe_error``."""
    described = [describe_error(e, data, hidden or {}, root, reword) for e in errors]
    out = []
    for elems, message in _in_words(_meant(described) or described):
        at = elems
        if elems and isinstance(elems[-1], str) and message.startswith(f"{elems[-1]}."):
            at = elems[:-1]  # the message names the key itself (``select.ncpus: >= needs a number``)
        out.append((elems, labelled(at, data), message))
    return out


def validation_issues(
    exc: ValidationError, data: Any, where: Where, root: Any, *, skip: Collection[Elems] = (),
    hidden: Mapping[Elems, str] | None = None, reword: Reword | None = None,
) -> list[ConfigIssue]:
    """Pydantic's errors as issues at their lines; ``root`` is the model the file is loaded as.

    ``skip``: locations already reported otherwise; ``hidden`` and ``reword`` as for ``describe_error``.
    """
    errors = [describe_error(e, data, hidden or {}, root, reword) for e in exc.errors(include_url=False)]
    return [where.issue(elems, message) for elems, message in _in_words(_meant([e for e in errors
                                                                                  if e.elems not in skip]))]


def _in_words(errors: list[Described]) -> list[tuple[Elems, str]]:
    """One message per problem: a value no branch of a union takes is one problem (``expected an
    integer or a number``), not one per branch."""
    grouped: dict[Elems, list[Described]] = {}
    for e in errors:
        grouped.setdefault(e.elems, []).append(e)
    out = []
    for elems, group in grouped.items():
        if len(group) > 1 and all(e.expected for e in group):
            wanted = " or ".join(dict.fromkeys(e.expected for e in group if e.expected))
            out.append((elems, f"expected {wanted}, got {group[0].got}"))
        else:
            out += [(elems, message) for message in dict.fromkeys(e.message for e in group)]
    return out
