"""Checks across sections and of the files a config names; the good path and ``check-config``."""

from __future__ import annotations

import io
import os
import sys
import textwrap
from pathlib import Path

import pytest

from config.load import LSF_SCRIPTS, load_config, public_url
from config.located import ConfigError
from provisioner.cli.checkconfig import check_config_main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "provisioner.yaml"


def executable(path: Path, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(mode)
    return path


def secret(path: Path, mode: int = 0o600) -> Path:
    path.write_text("AWS_ACCESS_KEY_ID=x\n")
    path.chmod(mode)
    return path


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A folder with everything a good config names: lsf scripts, a v2 executable, credentials."""
    for i, name in enumerate(LSF_SCRIPTS):
        executable(tmp_path / "aws" / "scripts" / (name + ".sh" if i % 2 else name))
    executable(tmp_path / "flexlm" / "provider")
    secret(tmp_path / "aws.env")
    secret(tmp_path / "tokens.yaml")
    return tmp_path


GOOD = """
instance: {id: cloud-a, serves: [aws-east, vcs-pool], planner: true}
controller: {url: "etcd://root:pa55@etcd1:2379,etcd2:2379/?token=abc"}
api: {listen: "127.0.0.1:8787", tokens: tokens.yaml}
providers:
  - name: aws-east
    kind: hosts
    script: {style: lsf, path: aws/scripts, conf_dir: aws}
    env_file: aws.env
  - name: vcs-pool
    kind: units
    script: {style: v2, path: flexlm/provider}
resources:
  - {name: vcs, elastic: true, base: 20, provider: vcs-pool}
"""


def write(folder: Path, text: str) -> Path:
    path = folder / "prov.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def problems(path: Path, check_files: bool = True) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(path, check_files=check_files)
    return [str(i) for i in info.value.issues]


# --- the good path -----------------------------------------------------------------------


def test_good_file_loads_with_paths_resolved_against_its_folder(site: Path) -> None:
    cfg = load_config(write(site, GOOD))
    aws, vcs = cfg.providers
    assert aws.script.path == site / "aws" / "scripts"
    assert aws.script.conf_dir == site / "aws"
    assert aws.env_file == site / "aws.env"
    assert vcs.script.path == site / "flexlm" / "provider"
    assert cfg.api.tokens == site / "tokens.yaml"


def test_relative_paths_do_not_depend_on_the_working_folder(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = site / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = load_config(Path("..") / write(site, GOOD).name)
    assert cfg.providers[1].script.path == site / "flexlm" / "provider"


def test_check_config_prints_a_summary_without_credentials(site: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert check_config_main(str(write(site, GOOD)), out, err) == 0
    text = out.getvalue()
    assert err.getvalue() == ""
    assert "cloud-a (planner: yes)" in text
    [controller] = [line for line in text.splitlines() if "controller" in line]
    assert controller.split() == ["controller", "etcd://etcd1:2379,etcd2:2379"]
    assert "pa55" not in text and "abc" not in text
    assert any(line.split()[-5:] == ["aws-east", "hosts", "lsf", "served", "here"] for line in text.splitlines())
    assert any(line.split()[-5:] == ["vcs-pool", "units", "v2", "served", "here"] for line in text.splitlines())
    assert "vcs  elastic, base 20, provider vcs-pool" in text


def test_check_config_prints_every_issue_and_returns_2(site: Path) -> None:
    (site / "flexlm" / "provider").unlink()
    path = write(site, GOOD.replace("serves: [aws-east, vcs-pool]", "serves: [aws-east, vcs-pool, vcs-poll]"))
    out, err = io.StringIO(), io.StringIO()
    assert check_config_main(str(path), out, err) == 2
    assert out.getvalue() == ""
    assert err.getvalue().splitlines() == [
        f"{path}:1: instance.serves[2]: no provider named 'vcs-poll' (did you mean 'vcs-pool'?)",
        f"{path}:11: providers[1].script.path: no such file: {site / 'flexlm' / 'provider'}",
    ]


def test_public_url_keeps_scheme_and_hosts_only() -> None:
    assert public_url("etcd://u:p@h1:2379,h2:2379/x?password=y") == "etcd://h1:2379,h2:2379"
    assert public_url("sqlite:///var/lib/p/state.db") == "sqlite:///var/lib/p/state.db"


def test_the_shipped_example_loads() -> None:
    cfg = load_config(EXAMPLE, check_files=False)
    assert cfg.instance.serves == ["aws-east", "vcs-pool"]
    assert {p.name for p in cfg.providers} >= set(cfg.instance.serves)
    out = io.StringIO()
    assert check_config_main(str(EXAMPLE), out, io.StringIO(), check_files=False) == 0


# --- checks across sections ------------------------------------------------------------------


def test_duplicate_provider_names(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        instance: {id: a}
        controller: {url: "sqlite:///x.db"}
        providers:
          - {name: p, kind: hosts, script: {style: v2, path: /opt/p}}
          - name: p
            kind: units
            script: {style: v2, path: /opt/q}
        """,
    )
    assert problems(path, check_files=False) == [
        f"{path}:5: providers[1].name: duplicate provider name 'p' (first at line 4)"
    ]


def test_serves_naming_an_unknown_provider(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        instance:
          id: a
          serves:
            - p
            - gcp
        controller: {url: "sqlite:///x.db"}
        providers:
          - {name: p, kind: hosts, script: {style: v2, path: /opt/p}}
        """,
    )
    assert problems(path, check_files=False) == [f"{path}:5: instance.serves[1]: no provider named 'gcp' (known: p)"]


def test_resource_provider_unknown_or_of_kind_hosts(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        instance: {id: a}
        controller: {url: "sqlite:///x.db"}
        providers:
          - {name: aws, kind: hosts, script: {style: v2, path: /opt/p}}
          - {name: flex, kind: units, script: {style: v2, path: /opt/q}}
        resources:
          - {name: vcs, elastic: true, provider: flx}
          - {name: vcs, elastic: true, provider: aws}
          - {name: hspice, elastic: true, provider: flex}
        """,
    )
    assert problems(path, check_files=False) == [
        f"{path}:7: resources[0].provider: no provider named 'flx' (did you mean 'flex'?)",
        f"{path}:8: resources[1].name: duplicate resource name 'vcs' (first at line 7)",
        f"{path}:8: resources[1].provider: provider 'aws' is of kind hosts; a resource needs a units provider",
    ]


def test_units_provider_cannot_use_lsf_style_and_timeouts_name_actions(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        instance: {id: a}
        controller: {url: "sqlite:///x.db"}
        api: {listen: "8787"}
        providers:
          - name: flex
            kind: units
            script:
              style: lsf
              path: /opt/q
              timeouts: {staus: 5s}
        """,
    )
    assert problems(path, check_files=False) == [
        f"{path}:3: api.listen: expected HOST:PORT (e.g. 127.0.0.1:8787), got '8787'",
        f"{path}:8: providers[0].script.style: style 'lsf' serves hosts only; a units provider needs style 'v2'",
        f"{path}:10: providers[0].script.timeouts.staus: unknown action (did you mean 'status'?)",
    ]


def test_persistent_mode_is_v2_only_and_its_keys_need_it(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        instance: {id: a}
        controller: {url: "sqlite:///x.db"}
        providers:
          - name: old
            kind: hosts
            script: {style: lsf, path: /opt/q, mode: persistent}
          - name: once
            kind: hosts
            script: {style: v2, path: /opt/p, ping_every: 2s}
        """,
    )
    assert problems(path, check_files=False) == [
        f"{path}:6: providers[0].script.mode: mode 'persistent' needs style 'v2' (style 'lsf' runs one process "
        "per call)",
        f"{path}:9: providers[1].script.ping_every: only used with mode: persistent (this provider runs one "
        "process per call)",
    ]


def test_secrets_name_variables_of_an_env_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        instance: {id: a}
        controller: {url: "sqlite:///x.db"}
        providers:
          - name: aws
            kind: hosts
            script: {style: v2, path: /opt/p, secrets: [LICENSE_SERVER, "2FA CODE"]}
            env_file: /etc/p.env
          - name: bare
            kind: hosts
            script:
              style: v2
              path: /opt/p
              secrets: [LICENSE_SERVER]
        """,
    )
    assert problems(path, check_files=False) == [
        f"{path}:6: providers[0].script.secrets[1]: not a variable name: '2FA CODE' (letters, digits and '_', "
        "not starting with a digit)",
        f"{path}:13: providers[1].script.secrets: names variables of the env_file, and this provider has no env_file",
    ], "the other provider's problem is reported in the same pass"
    path.write_text(path.read_text().replace(', "2FA CODE"', ""))
    assert problems(path, check_files=False) == [
        f"{path}:13: providers[1].script.secrets: names variables of the env_file, and this provider has no env_file",
    ]
    path.write_text(path.read_text().replace("      secrets: [LICENSE_SERVER]\n", ""))
    cfg = load_config(path, check_files=False)
    assert (cfg.providers[0].script.secrets, cfg.providers[1].script.secrets) == (["LICENSE_SERVER"], [])


def test_persistent_settings_default_and_must_be_positive(tmp_path: Path) -> None:
    doc = """
        instance: {id: a}
        controller: {url: "sqlite:///x.db"}
        providers:
          - name: p
            kind: units
            script: {style: v2, path: /opt/p, mode: persistent%s}
        """
    script = load_config(write(tmp_path, doc % ""), check_files=False).providers[0].script
    assert (script.mode, script.ping_every, script.start_timeout, script.restart_backoff_max) == (
        "persistent", 5.0, 30.0, 60.0)
    assert load_config(write(tmp_path, doc % """, start_timeout: 1m"""), check_files=False).providers[0] \
        .script.start_timeout == 60.0
    assert problems(write(tmp_path, doc % ", ping_every: 0s"), check_files=False) == [
        f"{tmp_path / 'prov.yaml'}:6: providers[0].script.ping_every: must be more than 0, got 0.0"]
    wrong = write(tmp_path, (doc % "").replace("mode: persistent", "mode: forever"))
    assert problems(wrong, check_files=False) == [
        f"{wrong}:6: providers[0].script.mode: expected one of 'oneshot', 'persistent', got 'forever'"]


def test_tls_needs_cert_and_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        instance: {id: a}
        controller: {url: "sqlite:///x.db"}
        api:
          tls: {cert: c.pem, kye: k.pem}
        """,
    )
    assert problems(path, check_files=False) == [
        f"{path}:4: api.tls.kye: unknown field (did you mean 'key'?)",
        f"{path}:4: api.tls.key: missing required field",
    ]


# --- checks of the files ---------------------------------------------------------------------


def test_script_path_missing(site: Path) -> None:
    (site / "flexlm" / "provider").unlink()
    path = write(site, GOOD)
    assert problems(path) == [f"{path}:11: providers[1].script.path: no such file: {site / 'flexlm' / 'provider'}"]


def test_lsf_folder_missing_one_script(site: Path) -> None:
    (site / "aws" / "scripts" / "getRequestStatus").unlink()
    path = write(site, GOOD)
    folder = site / "aws" / "scripts"
    assert problems(path) == [
        f"{path}:7: providers[0].script.path: missing script getRequestStatus (or getRequestStatus.sh) in {folder}"
    ]


def test_lsf_script_not_executable(site: Path) -> None:
    (site / "aws" / "scripts" / "requestMachines.sh").chmod(0o644)
    path = write(site, GOOD)
    script = site / "aws" / "scripts" / "requestMachines.sh"
    assert problems(path) == [f"{path}:7: providers[0].script.path: not executable: {script} (chmod +x)"]


def test_v2_path_not_executable(site: Path) -> None:
    (site / "flexlm" / "provider").chmod(0o644)
    path = write(site, GOOD)
    exe = site / "flexlm" / "provider"
    assert problems(path) == [f"{path}:11: providers[1].script.path: not executable: {exe} (chmod +x)"]


def test_v2_path_that_is_a_folder(site: Path) -> None:
    path = write(site, GOOD.replace("path: flexlm/provider", "path: flexlm"))
    [issue] = problems(path)
    assert issue.startswith(f"{path}:11: providers[1].script.path: not a file: {site / 'flexlm'}")


def test_conf_dir_missing(site: Path) -> None:
    path = write(site, GOOD.replace("conf_dir: aws}", "conf_dir: aws-conf}"))
    assert problems(path) == [f"{path}:7: providers[0].script.conf_dir: no such folder: {site / 'aws-conf'}"]


def test_env_file_mode_0644_is_too_open(site: Path) -> None:
    (site / "aws.env").chmod(0o644)
    path = write(site, GOOD)
    assert problems(path) == [
        f"{path}:8: providers[0].env_file: mode 0644 is too open, use 0600 (chmod 600 {site / 'aws.env'})"
    ]


def test_env_file_group_readable_is_too_open(site: Path) -> None:
    (site / "aws.env").chmod(0o640)
    [issue] = problems(write(site, GOOD))
    assert "providers[0].env_file: mode 0640 is too open, use 0600" in issue


def test_tokens_file_mode_0644_is_too_open(site: Path) -> None:
    (site / "tokens.yaml").chmod(0o644)
    path = write(site, GOOD)
    assert problems(path) == [
        f"{path}:3: api.tokens: mode 0644 is too open, use 0600 (chmod 600 {site / 'tokens.yaml'})"
    ]


def test_tokens_file_missing(site: Path) -> None:
    (site / "tokens.yaml").unlink()
    path = write(site, GOOD)
    assert problems(path) == [f"{path}:3: api.tokens: no such file: {site / 'tokens.yaml'}"]


def test_tls_files_must_exist(site: Path) -> None:
    (site / "cert.pem").write_text("x")
    path = write(site, GOOD.replace("tokens: tokens.yaml}",
                                    "tokens: tokens.yaml, tls: {cert: cert.pem, key: key.pem}}"))
    assert problems(path) == [f"{path}:3: api.tls.key: no such file: {site / 'key.pem'}"]


def test_sqlite_folder_under_a_file(site: Path) -> None:
    (site / "state").write_text("not a folder")
    db = site / "state" / "db" / "state.db"
    path = write(site, GOOD.replace('"etcd://root:pa55@etcd1:2379,etcd2:2379/?token=abc"', f'"sqlite://{db}"'))
    assert problems(path) == [
        f"{path}:2: controller.url: cannot create {site / 'state' / 'db'}: {site / 'state'} is not a folder"
    ]


def test_sqlite_folder_that_does_not_exist_yet_is_fine(site: Path) -> None:
    db = site / "var" / "lib" / "state.db"
    path = write(site, GOOD.replace('"etcd://root:pa55@etcd1:2379,etcd2:2379/?token=abc"', f'"sqlite://{db}"'))
    assert load_config(path).controller.url == f"sqlite://{db}"


def test_file_checks_are_skipped_on_request(site: Path) -> None:
    (site / "tokens.yaml").chmod(0o644)
    (site / "flexlm" / "provider").unlink()
    cfg = load_config(write(site, GOOD), check_files=False)
    assert cfg.api.tokens == site / "tokens.yaml"


def test_semantic_and_file_problems_are_reported_together(site: Path) -> None:
    (site / "aws.env").chmod(0o644)
    (site / "aws" / "scripts" / "getAvailableTemplates").unlink()
    path = write(site, GOOD.replace("provider: vcs-pool}", "provider: aws-east}"))
    lines = problems(path)
    assert [line.split(": ")[0:2] for line in lines] == [
        [f"{path}:7", "providers[0].script.path"],
        [f"{path}:8", "providers[0].env_file"],
        [f"{path}:13", "resources[0].provider"],
    ]


def test_a_v2_script_given_by_a_bare_name_is_found_on_the_path(tmp_path, monkeypatch):
    """``script: {style: v2, path: provisioner-ec2}``: the installed console script, wherever it is."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "my-provider"
    tool.write_text("#!/bin/sh\necho '{}'\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    config = tmp_path / "c.yaml"
    body = ("instance: {id: a, serves: [p]}\n"
            f"controller: {{url: 'sqlite:///{tmp_path}/state.db'}}\n"
            "providers:\n  - {name: p, kind: hosts, script: {style: v2, path: NAME}}\n")
    config.write_text(body.replace("NAME", "my-provider"))
    assert load_config(config).providers[0].script.path == tool
    config.write_text(body.replace("NAME", "no-such-provider"))
    with pytest.raises(ConfigError, match=r"providers\[0\]\.script\.path: no-such-provider: not found on PATH "
                                          r"nor beside the daemon's Python \("):
        load_config(config)


def test_a_bare_name_not_on_the_path_is_found_beside_the_running_python(tmp_path, monkeypatch):
    """``.venv/bin/provisioner`` run without an activated venv: PATH lacks the venv's bin, where the
    installed providers are; they are found beside the interpreter all the same, after PATH."""
    beside = Path(sys.executable).parent
    assert (beside / "provisioner-ec2").is_file(), "the test runs from the venv the project is installed in"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    config = tmp_path / "c.yaml"
    config.write_text("instance: {id: a, serves: [p]}\n"
                      f"controller: {{url: 'sqlite:///{tmp_path}/state.db'}}\n"
                      "providers:\n  - {name: p, kind: hosts, script: {style: v2, path: provisioner-ec2}}\n")
    assert load_config(config).providers[0].script.path == beside / "provisioner-ec2"
    on_path = tmp_path / "bin"
    on_path.mkdir()
    (on_path / "provisioner-ec2").write_text("#!/bin/sh\n")
    (on_path / "provisioner-ec2").chmod(0o755)
    monkeypatch.setenv("PATH", str(on_path))
    assert load_config(config).providers[0].script.path == on_path / "provisioner-ec2", "PATH comes first"


def test_check_config_checks_an_lsf_work_dir_relative_to_the_file(site: Path) -> None:
    """Issue 28, item 4: ``script.work_dir`` (the plugin's PRO_DATA_DIR) is taken against the config's folder,
    and must be a folder the daemon can write in, or create."""
    def lines(work_dir: str) -> list[str]:
        path = write(site, GOOD.replace("conf_dir: aws}", f"conf_dir: aws, work_dir: {work_dir}}}"))
        out, err = io.StringIO(), io.StringIO()
        check_config_main(str(path), out, err)
        return err.getvalue().splitlines()

    path = write(site, GOOD.replace("conf_dir: aws}", "conf_dir: aws, work_dir: lsf/data}"))
    assert load_config(path).providers[0].script.work_dir == site / "lsf" / "data"
    assert lines("lsf/data") == [], "a folder that is not there yet is made by the daemon"
    (site / "lsf").write_text("a file")
    assert lines("lsf/data") == [
        f"{path}:7: providers[0].script.work_dir: cannot create {site / 'lsf' / 'data'}: "
        f"{site / 'lsf'} is not a folder"]
    assert lines("lsf") == [f"{path}:7: providers[0].script.work_dir: not a folder: {site / 'lsf'}"]
    # /proc/1 is a folder nobody may write in, root included.
    assert lines("/proc/1") == [f"{path}:7: providers[0].script.work_dir: not writable: /proc/1 (permission denied)"]
    assert lines("/proc/1/data") == [f"{path}:7: providers[0].script.work_dir: cannot create /proc/1/data: "
                                     "/proc/1 is not writable (permission denied)"]


def test_a_v2_provider_is_given_no_work_dir(tmp_path: Path) -> None:
    """A v2 script gets no PRO_DATA_DIR: a work_dir set for one would be silently ignored."""
    path = write(tmp_path, """
        instance: {id: a}
        controller: {url: "sqlite:///x.db"}
        providers:
          - {name: p, kind: hosts, script: {style: v2, path: /opt/p, work_dir: /var/lib/p}}
        """)
    assert problems(path, check_files=False) == [
        f"{path}:4: providers[0].script.work_dir: only used with style: lsf (its plugin's PRO_DATA_DIR); a v2 "
        "script is given no work folder: name its state folder in its env_file"]


# --- one pass, and only this instance's files (issue 34, items 4 and 7) --------------------------


IMPORTED = """
instance: {id: lsf-a, serves: [awsv2]}
controller: {url: "sqlite:///state.db"}
providers:
  - name: awsv2
    kind: hosts
    script: {style: lsf, path: aws/scripts, conf_dir: aws}
  - name: ourdaemon
    kind: hosts
    script:
      style: lsf
      path: /opt/ourdaemon/scripts/scripts
      conf_dir: /opt/ourdaemon/conf
    env_file: /etc/provisioner/ourdaemon.env
"""


def test_a_provider_another_instance_serves_is_checked_for_schema_only(site: Path) -> None:
    """An imported section names a plugin whose folders are on another host: this instance does not serve it,
    so check-config passes here (it said "no such file" for its folder)."""
    assert not Path("/opt/ourdaemon").exists()
    path = write(site, IMPORTED)
    out, err = io.StringIO(), io.StringIO()
    assert check_config_main(str(path), out, err) == 0, err.getvalue()
    assert any(line.split()[-5:] == ["ourdaemon", "hosts", "lsf", "served", "by"] or "ourdaemon" in line
               and "served by another instance" in line for line in out.getvalue().splitlines())
    # Its structure is still checked, and its files once this instance serves it.
    assert problems(write(site, IMPORTED.replace("style: lsf\n      path: /opt", "style: lfs\n      path: /opt"))) \
        == [f"{path}:10: providers[1].script.style: expected one of 'lsf', 'v2', got 'lfs'"]
    served = problems(write(site, IMPORTED.replace("serves: [awsv2]", "serves: [awsv2, ourdaemon]")))
    assert [line.split(": ", 2)[1] for line in served] == [
        "providers[1].script.path", "providers[1].script.conf_dir", "providers[1].env_file"], served


def test_a_serves_typo_is_reported_with_the_schema_errors_in_one_pass(site: Path) -> None:
    """check-config reported in passes: the typo in serves showed only once the bad duration was fixed."""
    path = write(site, GOOD.replace("serves: [aws-east, vcs-pool]", "serves: [aws-east, vcs-poll]")
                 + "policy: {idle_time: 10 minutes}\n")
    assert problems(path, check_files=False) == [
        f"{path}:1: instance.serves[1]: no provider named 'vcs-poll' (did you mean 'vcs-pool'?)",
        f"{path}:14: policy.idle_time: not a duration: '10 minutes' (use e.g. 90s, 10m, 2h)",
    ]


def test_one_pass_reports_cross_references_and_files_beside_a_bad_provider_entry(site: Path) -> None:
    """A provider entry with a structural problem is left out of the other checks (it is not reported as
    missing where it is named), while the rest of the file is checked, its files too."""
    (site / "aws.env").chmod(0o644)
    text = (GOOD.replace("kind: units", "kind: unit")
            .replace("resources:\n", "resources:\n  - {name: lic, provider: nobody}\n"))
    path = write(site, text)
    lines = problems(path)
    assert [line.split(": ", 2)[1] for line in lines] == [
        "providers[0].env_file", "providers[1].kind", "resources[0].provider"], lines
    assert "no provider named 'nobody'" in lines[2]
    assert not any("named 'vcs-pool'" in line for line in lines), "an entry with problems of its own is still a name"
