"""env_file parsing, the script environment's precedence, and scrubbing."""

from __future__ import annotations

from pathlib import Path

import pytest

from providers.environment import (
    DEFAULT_PATH,
    EnvFileError,
    Scrubber,
    read_env_file,
    script_env,
    secret_name,
    unmasked_warning,
)


def test_env_file_syntax(tmp_path):
    path = tmp_path / "p.env"
    path.write_text(
        "\n".join(
            [
                "# AWS credentials",
                "",
                "AWS_ACCESS_KEY_ID=AKIA123",
                "export AWS_SECRET_ACCESS_KEY='abc#def $HOME'",
                '  export\tMOTD="say \\"hi\\"\\n\\$x" # trailing comment',
                "PASSWORD=pa#ss word  ",
                "EMPTY=",
                'QUOTED_EMPTY=""',
            ]
        )
    )
    assert read_env_file(path) == {
        "AWS_ACCESS_KEY_ID": "AKIA123",
        "AWS_SECRET_ACCESS_KEY": "abc#def $HOME",
        "MOTD": 'say "hi"\n$x',
        "PASSWORD": "pa#ss word",
        "EMPTY": "",
        "QUOTED_EMPTY": "",
    }


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("no equals sign topsecret", "expected KEY=VALUE"),
        ("1BAD=topsecret", "'1BAD' is not a valid variable name"),
        ("MY KEY=topsecret", "'MY KEY' is not a valid variable name"),
        ("TOKEN='topsecret", "TOKEN: unterminated quoted value"),
        ('TOKEN="topsecret" extra', "TOKEN: unexpected text after the closing quote"),
        ("PROVISIONER_TOKEN=topsecret", "PROVISIONER_TOKEN is set by the daemon"),
        ("PROVIDER_NAME=topsecret", "PROVIDER_NAME is set by the daemon"),
    ],
)
def test_bad_env_file_line_names_file_and_line_but_not_the_value(tmp_path, line, message):
    path = tmp_path / "p.env"
    path.write_text(f"# header\nOK=1\n{line}\n")
    with pytest.raises(EnvFileError) as caught:
        read_env_file(path)
    assert str(caught.value).startswith(f"{path}:3: {message}")
    assert "topsecret" not in str(caught.value)


def test_missing_or_binary_env_file(tmp_path):
    with pytest.raises(EnvFileError, match="env_file not found"):
        read_env_file(tmp_path / "nope.env")
    binary = tmp_path / "bin.env"
    binary.write_bytes(b"A=\xff\n")
    with pytest.raises(EnvFileError, match="not UTF-8"):
        read_env_file(binary)


def test_env_file_can_move_lsf_paths_but_not_daemon_variables(tools, tmp_path):
    cfg = tools.provider(tmp_path / "scripts", style="lsf", kind="hosts")
    env = script_env(
        cfg,
        "request",
        token="tok",
        deadline=1000.9,
        work_dir=tmp_path / "w",
        env_file={"PRO_LSF_TOP": "/opt/lsf", "PATH": "/opt/cloud/bin:/usr/bin"},
        daemon_env={"PATH": "/venv/bin", "HOME": "/root", "LANG": "", "USER": "x"},
    )
    assert env["PRO_LSF_TOP"] == "/opt/lsf"
    assert env["PRO_CONF_DIR"] == str(tmp_path / "scripts")
    assert env["PATH"] == "/opt/cloud/bin:/usr/bin"
    assert env["PROVISIONER_DEADLINE"] == "1000"
    assert env["PROVISIONER_TOKEN"] == "tok"
    assert "USER" not in env and "LANG" not in env
    assert env["HOME"] == "/root"


def test_v2_env_has_no_lsf_family(tools, tmp_path):
    env = script_env(
        tools.provider(tmp_path / "exe"),
        "describe",
        token=None,
        deadline=5,
        work_dir=tmp_path,
        env_file={},
        daemon_env={},
    )
    assert env == {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "PROVIDER_NAME": "p1",
        "PROVIDER_KIND": "hosts",
        "PROVISIONER_ACTION": "describe",
        "PROVISIONER_DEADLINE": "5",
    }


def test_scrubber_replaces_longest_secrets_first_and_skips_short_values():
    scrub = Scrubber({"A_KEY": "abcdef", "B_KEY": "abcdefgh", "C_KEY": "eu", "D_KEY": "xyz", "E_KEY": ""})
    assert scrub("key abcdefgh and abcdef in eu, xyz") == "key *** and *** in eu, xyz"
    assert scrub.margin == 8
    assert scrub.unmasked == ("C_KEY", "D_KEY"), "short secrets are named, an empty one has nothing to hide"
    assert (scrub.found("r-abcdefgh-1"), scrub.found("r-abcdef"), scrub.found("r-eu-1")) == ("B_KEY", "A_KEY", None)
    assert Scrubber({}).margin == 0


@pytest.mark.parametrize(("name", "secret"), [
    ("AWS_SECRET_ACCESS_KEY", True), ("AWS_SESSION_TOKEN", True), ("DB_PASSWORD", True), ("api_key", True),
    ("GOOGLE_APPLICATION_CREDENTIALS", True), ("Vault_Token_File", True), ("SSH_KEY", True),
    ("SECRET_KEY_ID", True),  # SECRET says so, whatever the end
    ("AWS_ACCESS_KEY_ID", False), ("KEY_ID", False), ("aws_access_key_id", False),
    ("AWS_DEFAULT_REGION", False), ("AWS_REGION", False), ("AWS_ENDPOINT_URL", False),
    ("EC2_PROVIDER_CONFIG", False), ("PRO_CONF_DIR", False), ("LM_LICENSE_FILE", False), ("PATH", False),
])
def test_a_variable_is_secret_when_its_name_says_so(name, secret):
    assert secret_name(name) is secret


def test_a_provider_config_lists_further_secrets_by_their_exact_name():
    assert secret_name("LICENSE_SERVER", ["LICENSE_SERVER"])
    assert not secret_name("license_server", ["LICENSE_SERVER"])
    env = {"AWS_DEFAULT_REGION": "us-west-2", "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
           "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG", "LICENSE_SERVER": "27000@lic1.example",
           "EC2_PROVIDER_CONFIG": "/etc/provisioner/aws.yaml"}
    scrub = Scrubber.of(env, ["LICENSE_SERVER"])
    text = "ip-10-20-1-4.us-west-2.compute.internal AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG 27000@lic1.example " \
           "/etc/provisioner/aws.yaml"
    assert scrub(text) == \
        "ip-10-20-1-4.us-west-2.compute.internal AKIAIOSFODNN7EXAMPLE *** *** /etc/provisioner/aws.yaml"
    assert Scrubber.of(env)(text).count("***") == 1, "not listed, the license server is no secret"


def test_the_warning_for_short_secrets_names_them_and_never_shows_them(tmp_path):
    env = tmp_path / "p.env"
    scrub = Scrubber.of({"DB_PASSWORD": "pw1", "API_TOKEN": "", "REGION": "eu"})
    assert scrub.unmasked == ("DB_PASSWORD",)
    text = unmasked_warning("p1", env, scrub.unmasked)
    assert text == (f"provider p1: {env}: DB_PASSWORD is a secret shorter than 4 characters, not masked in what "
                    "its scripts print (a longer value is; an empty one has nothing to hide)")
    assert "pw1" not in text


def test_the_lsf_guide_says_what_a_plugins_environment_is_and_how_to_give_it_path_and_pythonpath(tools, tmp_path):
    """A Python plugin moved from LSF lost its libraries: the daemon's environment does not reach it. The
    migration guide says so with the PATH the runner really gives, and its env_file example gives a
    plugin PATH and PYTHONPATH (issue 34, item 4)."""
    guide = (Path(__file__).resolve().parents[2] / "docs" / "migrating-from-lsf.md").read_text()
    section = guide[guide.index("#### The plugin's environment"):]
    section = section[:section.index("\nThen check it")]
    assert f"`PATH` is\n`{DEFAULT_PATH}`" in section
    assert "PYTHONPATH" in section and "env_file" in section and "provider resume" in section

    cfg = tools.provider(tmp_path / "scripts", style="lsf", kind="hosts")
    daemon = {"PATH": "/opt/lsf/10.1/bin:/usr/bin", "PYTHONPATH": "/opt/lsf/python", "LSF_ENVDIR": "/opt/lsf/conf"}
    bare = script_env(cfg, "describe", token=None, deadline=5, work_dir=tmp_path, env_file={}, daemon_env=daemon)
    assert bare["PATH"] == DEFAULT_PATH and "PYTHONPATH" not in bare and "LSF_ENVDIR" not in bare

    example = section[section.index("# /etc/provisioner/awsv2.env"):]
    env_file = tmp_path / "awsv2.env"
    env_file.write_text(example[:example.index("```")])
    given = read_env_file(env_file)
    env = script_env(cfg, "describe", token=None, deadline=5, work_dir=tmp_path, env_file=given, daemon_env=daemon)
    assert env["PATH"] == given["PATH"] != DEFAULT_PATH and env["PYTHONPATH"] == given["PYTHONPATH"]
    assert "$" not in given["PATH"], "spelled out: the env_file expands no variables"
