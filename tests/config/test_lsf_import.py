"""``provisioner/cli/lsf_import.py``: an LSF ``hostProviders.json`` becomes a ``providers:`` section to run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from provisioner.cli.lsf_import import LsfImportError, bases_from_env, providers_section

SCRIPTS = ("getAvailableTemplates", "requestMachines", "getRequestStatus", "requestReturnMachines",
           "getReturnRequests")
#: The example of LSF's own documentation layout (shared with the contract examples).
LSF_EXAMPLE = {"providers": [
    {"name": "awsv2", "type": "awsProv", "confPath": "resource_connector/awsv2",
     "scriptPath": "resource_connector/awsv2"},
    {"name": "ourdaemon", "type": "customProv", "confPath": "/opt/ourdaemon/conf",
     "scriptPath": "/opt/ourdaemon/scripts"},
]}


def section(doc: object, present: set[str] = frozenset(), **bases: str) -> str:
    return providers_section(json.dumps(doc), source="hostProviders.json", exists=lambda p: p in present, **bases)


def entries(text: str) -> list[dict]:
    return yaml.safe_load(text)["providers"]


def attention(text: str, name: str) -> list[str]:
    """The '# attention' comments right above the entry called ``name``."""
    lines = text.splitlines()
    at = lines.index(f"  - name: {name}")
    notes = []
    for line in reversed(lines[:at]):
        if not line.startswith("  # "):
            break
        if line.startswith("  # attention: "):
            notes.insert(0, line.removeprefix("  # attention: "))
    return notes


def test_each_entry_becomes_an_lsf_style_provider_with_the_ibm_layout():
    present = {"/opt/lsf/conf/resource_connector/awsv2", "/opt/lsf/10.1/resource_connector/awsv2/scripts"}
    text = section(LSF_EXAMPLE, present, conf_base="/opt/lsf/conf", script_base="/opt/lsf/10.1")
    first = entries(text)[0]
    assert first == {"name": "awsv2", "kind": "hosts", "script": {
        "style": "lsf", "path": "/opt/lsf/10.1/resource_connector/awsv2/scripts",
        "conf_dir": "/opt/lsf/conf/resource_connector/awsv2"}}
    assert attention(text, "awsv2") == []
    assert "  # note: IBM's AWS plugin; provisioner-ec2 can replace it (docs/migrating-from-lsf.md)" in text


def test_paths_that_do_not_exist_here_are_flagged():
    text = section(LSF_EXAMPLE, set(), conf_base="/opt/lsf/conf", script_base="/opt/lsf/10.1")
    notes = attention(text, "ourdaemon")
    assert "/opt/ourdaemon/scripts/scripts does not exist on this host" in notes
    assert "confPath /opt/ourdaemon/conf does not exist on this host" in notes


def test_a_script_path_holding_the_scripts_itself_is_used_as_it_is():
    present = {"/opt/ourdaemon/conf", "/opt/ourdaemon/scripts/getRequestStatus.sh"}
    text = section({"providers": [LSF_EXAMPLE["providers"][1]]}, present)
    assert entries(text)[0]["script"]["path"] == "/opt/ourdaemon/scripts"
    assert attention(text, "ourdaemon") == [
        "the scripts are in scriptPath itself, not in scriptPath/scripts: path set to /opt/ourdaemon/scripts"]


def test_relative_paths_without_lsf_folders_are_flagged_not_guessed():
    text = section({"providers": [LSF_EXAMPLE["providers"][0]]})
    assert entries(text)[0]["script"]["conf_dir"] == "resource_connector/awsv2"
    notes = attention(text, "awsv2")
    assert any(n.startswith("confPath resource_connector/awsv2 is relative to LSF_ENVDIR") for n in notes)
    assert any(n.startswith("scriptPath resource_connector/awsv2 is relative to LSF_SERVERDIR/../..") for n in notes)


def test_missing_fields_duplicates_bad_names_and_disabled_entries_need_attention():
    doc = {"providers": [
        {"name": "a", "confPath": "/c", "scriptPath": "/s"},
        {"name": "a", "confPath": "/c", "scriptPath": "/s"},
        {"confPath": "/c", "scriptPath": "/s"},
        {"name": "bad name!", "scriptPath": "/s", "confPath": "/c", "enabled": 0},
        {"name": "k8s-hf", "enabled": 1, "plugin": "k8s-hf", "confPath": "${HF_CONFDIR}/providers/k8s-hf/conf"},
    ]}
    text = section(doc, {"/c", "/s/scripts"})
    got = entries(text)
    assert [e["name"] for e in got] == ["a", "a", "provider-3", "bad name!", "k8s-hf"]
    lines = text.splitlines()
    second = [i for i, line in enumerate(lines) if line == "  - name: a"][1]
    assert lines[second - 1] == "  # attention: the name is also that of entry 1; names must be unique"
    assert attention(text, "provider-3") == ["no name in the file: called provider-3 here"]
    bad = attention(text, '"bad name!"')
    assert any("rename it" in n for n in bad) and any("enabled: 0" in n for n in bad)
    hf = attention(text, "k8s-hf")
    assert [n for n in hf if "scriptPath" in n] == [
        "no scriptPath (Symphony names it in hostProviderPlugins.json): set script.path to the plugin's scripts folder"]
    assert any("uses ${HF_CONFDIR}" in n for n in hf)
    assert "path" not in got[4]["script"], "no path is made up: check-config reports the missing key"
    assert got[4]["script"]["conf_dir"] == "${HF_CONFDIR}/providers/k8s-hf/conf"


def test_what_is_not_a_host_providers_file_is_an_error_naming_it():
    with pytest.raises(LsfImportError, match=r"^hp.json:1:2: not JSON"):
        providers_section("{,", source="hp.json")
    with pytest.raises(LsfImportError, match="'providers' list"):
        providers_section('{"providerplugins": []}', source="hp.json")
    assert "providers: []" in providers_section('{"providers": []}')


def test_lsf_folders_come_from_the_administrators_environment():
    env = {"LSF_ENVDIR": "/opt/lsf/conf", "LSF_SERVERDIR": "/opt/lsf/10.1/linux3.10-glibc2.17-x86_64/etc"}
    assert bases_from_env(env) == {"conf_base": "/opt/lsf/conf", "script_base": "/opt/lsf/10.1"}
    assert bases_from_env({}) == {"conf_base": None, "script_base": None}


@pytest.mark.slow  # real processes
def test_the_section_in_a_minimal_config_passes_check_config(tmp_path):
    top = tmp_path / "lsf"
    conf = top / "conf" / "resource_connector" / "awsv2"
    scripts = top / "10.1" / "resource_connector" / "awsv2" / "scripts"
    for folder in (conf / "conf", scripts):
        folder.mkdir(parents=True)
    for name in SCRIPTS:
        script = scripts / f"{name}.sh"
        script.write_text("#!/bin/sh\necho '{}'\n")
        script.chmod(0o755)
    hp = {"providers": [{"name": "awsv2", "type": "awsProv", "confPath": "resource_connector/awsv2",
                         "scriptPath": "resource_connector/awsv2"}]}
    text = providers_section(json.dumps(hp), source="hostProviders.json", conf_base=str(top / "conf"),
                             script_base=str(top / "10.1"))
    config = tmp_path / "provisioner.yaml"
    config.write_text(
        "instance: {id: a, serves: [awsv2], planner: true}\n"
        f"controller: {{url: 'sqlite:///{tmp_path}/state.db'}}\n"
        f"home: {tmp_path}/home\n" + text)
    proc = subprocess.run([sys.executable, "-m", "provisioner.cli", "check-config", str(config)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "awsv2" in proc.stdout and "lsf" in proc.stdout


@pytest.mark.slow  # real processes
def test_provisioner_import_lsf_prints_a_section_check_config_accepts(tmp_path):
    """The command as an LSF administrator runs it, with LSF's environment giving the folders."""
    top = tmp_path / "lsf"
    conf = top / "conf" / "resource_connector" / "awsv2"
    scripts = top / "10.1" / "resource_connector" / "awsv2" / "scripts"
    for folder in (conf / "conf", scripts):
        folder.mkdir(parents=True)
    for name in SCRIPTS:
        (scripts / f"{name}.sh").write_text("#!/bin/sh\necho '{}'\n")
        (scripts / f"{name}.sh").chmod(0o755)
    hp = tmp_path / "hostProviders.json"
    hp.write_text(json.dumps({"providers": [{"name": "awsv2", "type": "awsProv", "confPath": "resource_connector/awsv2",
                                             "scriptPath": "resource_connector/awsv2"}]}))
    env = {**os.environ, "LSF_ENVDIR": str(top / "conf"), "LSF_SERVERDIR": str(top / "10.1" / "linux" / "etc")}
    out = subprocess.run([sys.executable, "-m", "provisioner.cli", "import-lsf", str(hp)], capture_output=True,
                         text=True, timeout=60, env=env)
    assert out.returncode == 0 and out.stdout.startswith(("providers:", "#")), out.stderr
    config = tmp_path / "provisioner.yaml"
    config.write_text("instance: {id: a, serves: [awsv2], planner: true}\n"
                      f"controller: {{url: 'sqlite:///{tmp_path}/state.db'}}\n"
                      f"home: {tmp_path}/home\n" + out.stdout)
    check = subprocess.run([sys.executable, "-m", "provisioner.cli", "check-config", str(config)],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stderr
    missing = subprocess.run([sys.executable, "-m", "provisioner.cli", "import-lsf", str(tmp_path / "none.json")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "none.json" in missing.stderr and len(missing.stderr.splitlines()) == 1
