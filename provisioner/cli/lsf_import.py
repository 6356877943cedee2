"""``provisioner import-lsf``: an LSF resource connector's ``hostProviders.json`` as a ``providers:`` section.

An LSF site moving to the daemon already lists its provider plugins in
``hostProviders.json``; retyping them invites a wrong path. This turns each
entry into a provider the daemon runs unchanged (``style: lsf``), and puts a
YAML comment above every entry that needs a look, so the operator reads what
to fix in the text they are about to paste, and ``provisioner check-config``
confirms it.

Pure apart from ``exists``, which is asked whether a path is there (tests
give their own): no file is read or written here.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from typing import Any, Callable, Mapping

#: A provider name the daemon accepts (docs/config.md, "Names").
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
#: The scripts of an LSF plugin; one of them is enough to tell a script folder.
SCRIPTS = ("getAvailableTemplates", "requestMachines", "getRequestStatus", "requestReturnMachines",
           "getReturnRequests")
#: Words YAML reads as something other than a string when left unquoted.
YAML_WORDS = {"y", "yes", "n", "no", "on", "off", "true", "false", "null", "~"}


class LsfImportError(ValueError):
    """The file cannot be imported at all (not JSON, no ``providers`` list); the message names the place."""


def bases_from_env(env: Mapping[str, str]) -> dict[str, str | None]:
    """The folders LSF reads relative paths from, from an LSF administrator's environment.

    A relative ``confPath`` is under ``LSF_ENVDIR`` (e.g. ``/opt/lsf/conf``);
    a relative ``scriptPath`` is under ``LSF_SERVERDIR/../..`` (e.g.
    ``/opt/lsf/10.1``). Unset variables leave relative paths to the operator,
    with a comment saying so.
    """
    serverdir = env.get("LSF_SERVERDIR") or ""
    return {
        "conf_base": env.get("LSF_ENVDIR") or None,
        "script_base": posixpath.normpath(posixpath.join(serverdir, "..", "..")) if serverdir else None,
    }


def providers_section(text: str, *, source: str = "hostProviders.json", conf_base: str | None = None,
                      script_base: str | None = None,
                      exists: Callable[[str], bool] = os.path.exists) -> str:
    """The text of a ``providers:`` YAML section for every entry of a ``hostProviders.json``.

    Each entry ``{name, type, confPath, scriptPath}`` becomes::

        - name: NAME
          kind: hosts
          script: {style: lsf, path: SCRIPTPATH/scripts, conf_dir: CONFPATH}

    (IBM's plugins keep their scripts in ``scripts/`` under ``scriptPath``; a
    ``scriptPath`` that holds the scripts itself is used as it is.) Relative
    paths are resolved against ``conf_base`` (``LSF_ENVDIR``) and
    ``script_base`` (``LSF_SERVERDIR/../..``) when given. A comment
    ``# attention: ...`` precedes each entry with a missing field, a path
    that does not exist on this host, a relative path left unresolved, a
    duplicate or unusable name, or ``enabled: 0``; a ``# note:`` marks an
    IBM AWS plugin that ``provisioner-ec2`` can replace. Raises ``LsfImportError``
    when the text is not a hostProviders document at all.
    """
    entries = _entries(text, source)
    count = f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"
    lines = [f"# providers imported from {_one_line(source)} by provisioner import-lsf: {count}.",
             "# Check every '# attention' comment, then run provisioner check-config on the whole file."]
    if not entries:
        return "\n".join(lines + ["providers: []", ""])
    lines.append("providers:")
    names: dict[str, int] = {}
    for n, entry in enumerate(entries):
        lines += _entry(n, entry, names, conf_base, script_base, exists)
    return "\n".join(lines) + "\n"


def _entries(text: str, source: str) -> list[Any]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LsfImportError(f"{source}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("providers"), list):
        raise LsfImportError(f"{source}: expected an object with a 'providers' list (LSF's hostProviders.json)")
    return doc["providers"]


def _entry(n: int, entry: Any, names: dict[str, int], conf_base: str | None, script_base: str | None,
           exists: Callable[[str], bool]) -> list[str]:
    where = f"providers[{n}]"
    if not isinstance(entry, dict):
        return [f"  # attention: {where} in the file is not an object; left out"]
    notes: list[str] = []
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        name = f"provider-{n + 1}"
        notes.append(f"no name in the file: called {name} here")
    elif not NAME.match(name):
        notes.append("the daemon takes names of 1 to 63 letters, digits, '.', '_' and '-', "
                     "starting with a letter or digit: rename it")
    if name in names:
        notes.append(f"the name is also that of entry {names[name] + 1}; names must be unique")
    names.setdefault(name, n)
    if entry.get("enabled", 1) in (0, "0", False):
        notes.append("disabled in the file (enabled: 0): remove it, or leave it out of instance.serves")
    conf = _path(entry.get("confPath"), conf_base, "confPath", "LSF_ENVDIR", notes)
    path = None
    if "scriptPath" not in entry:
        notes.append("no scriptPath (Symphony names it in hostProviderPlugins.json): "
                     "set script.path to the plugin's scripts folder")
    else:
        script = _path(entry.get("scriptPath"), script_base, "scriptPath", "LSF_SERVERDIR/../..", notes)
        path = None if script is None else _script_folder(script, exists, notes)
    if conf is not None and "${" not in conf and not exists(conf):
        notes.append(f"confPath {conf} does not exist on this host")

    out = [f"  # attention: {_one_line(note)}" for note in notes]
    if entry.get("type") == "awsProv":
        out.append("  # note: IBM's AWS plugin; provisioner-ec2 can replace it (docs/migrating-from-lsf.md)")
    out += [f"  - name: {_scalar(name)}", "    kind: hosts", "    script:", "      style: lsf"]
    if path is not None:
        out.append(f"      path: {_scalar(path)}")
    if conf is not None:
        out.append(f"      conf_dir: {_scalar(conf)}")
    return out


def _path(raw: Any, base: str | None, key: str, base_name: str, notes: list[str]) -> str | None:
    if raw is None:
        notes.append(f"no {key} in the file")
        return None
    if not isinstance(raw, str) or not raw.strip():
        notes.append(f"{key} is not a path: {_one_line(repr(raw))}")
        return None
    path = raw.strip()
    if "${" in path:
        notes.append(f"{key} uses {', '.join(sorted(set(re.findall(r'[$][{][^}]*[}]', path))))}: the daemon "
                     "expands ${VAR} from its own environment when it loads the config, or write the path out")
    if path.startswith(("/", "~", "${")):
        return path.rstrip("/") or "/"
    if base is None:
        notes.append(f"{key} {path} is relative to {base_name} for LSF, but to the config file's folder for the "
                     "daemon: write it out in full")
        return path.rstrip("/")
    return posixpath.normpath(posixpath.join(base, path))


def _script_folder(script: str, exists: Callable[[str], bool], notes: list[str]) -> str:
    """``scriptPath/scripts`` as in IBM's plugins, or ``scriptPath`` itself when the scripts are there."""
    nested = posixpath.join(script, "scripts")
    if "${" in script or exists(nested):
        return nested
    if any(exists(posixpath.join(script, s + ext)) for s in SCRIPTS for ext in (".sh", "")):
        notes.append(f"the scripts are in scriptPath itself, not in scriptPath/scripts: path set to {script}")
        return script
    notes.append(f"{nested} does not exist on this host")
    return nested


def _scalar(value: str) -> str:
    """A YAML scalar: plain where YAML reads it back as the same string, double-quoted otherwise."""
    plain = re.fullmatch(r"[A-Za-z0-9_/~][A-Za-z0-9_./~-]*", value) is not None
    if plain and value.lower() not in YAML_WORDS and not re.fullmatch(r"[-+.0-9_eE]+", value):
        return value
    return json.dumps(value)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())
