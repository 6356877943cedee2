"""Broken config files: syntax and structure problems are reported at file:line with the field path."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from config.load import load_config
from config.located import ConfigError, ConfigIssue

MINIMAL = """
instance: {id: a}
controller: {url: "sqlite:///var/lib/provisioner/state.db"}
"""


def write(tmp_path: Path, *parts: str, name: str = "prov.yaml") -> Path:
    path = tmp_path / name
    path.write_text("".join(textwrap.dedent(p).lstrip("\n") for p in parts))
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(path, check_files=False)
    return [str(i) for i in info.value.issues]


def test_issue_prints_as_file_line_path_message() -> None:
    issue = ConfigIssue("prov.yaml", 14, "providers[1].script.path", "no such file: /opt/x")
    assert str(issue) == "prov.yaml:14: providers[1].script.path: no such file: /opt/x"
    assert str(ConfigIssue("prov.yaml", None, "", "cannot read: No such file or directory")) == (
        "prov.yaml: cannot read: No such file or directory"
    )


def test_yaml_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        instance: {id: a}
        controller:
          url: "sqlite:///x.db"
         bad: [1, 2
        """,
    )
    [issue] = problems(path)
    assert issue.startswith(f"{path}:4: YAML syntax error: ")
    assert "(column 2)" in issue


def test_unreadable_and_empty_and_non_mapping_files(tmp_path: Path) -> None:
    assert problems(tmp_path / "absent.yaml") == [
        f"{tmp_path / 'absent.yaml'}: cannot read: No such file or directory"
    ]
    empty = write(tmp_path, "# only a comment\n", name="empty.yaml")
    [issue] = problems(empty)
    assert issue.startswith(f"{empty}:1: the file is empty")
    listing = write(tmp_path, "- instance\n- controller\n", name="list.yaml")
    assert problems(listing) == [
        f"{listing}:1: the top level must be a mapping of sections (instance:, controller:, ...), got a list"
    ]


def test_wrong_type(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        MINIMAL,
        """
        budget:
          max_hosts: many
        """,
    )
    assert problems(path) == [f"{path}:4: budget.max_hosts: expected an integer, got 'many'"]


def test_unknown_key_suggests_the_close_one(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        MINIMAL,
        """
        providers:
          - name: p
            kind: hosts
            scirpt: {style: v2, path: /opt/p}
        """,
    )
    assert problems(path) == [
        f"{path}:4: providers[0].script: missing required field",
        f"{path}:6: providers[0].scirpt: unknown field (did you mean 'script'?)",
    ]


def test_unknown_key_without_a_close_match_lists_the_known_ones(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL, "lease: {ttl: 10s, zzz: 1}\n")
    assert problems(path) == [f"{path}:3: lease.zzz: unknown field (known: ttl, renew_every)"]


def test_bad_enum_lists_the_choices(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        MINIMAL,
        """
        providers:
          - name: p
            kind: hosts
            script:
              style: lfs
              path: /opt/p
        """,
    )
    assert problems(path) == [f"{path}:7: providers[0].script.style: expected one of 'lsf', 'v2', got 'lfs'"]


def test_yaml_boolean_in_an_enum_gets_a_quoting_hint(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL, "policy: {orphans: no}\n")
    [issue] = problems(path)
    assert issue.startswith(f"{path}:3: policy.orphans: expected one of 'return', 'report', got false")
    assert "quote" in issue


def test_bad_duration(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        MINIMAL,
        """
        policy:
          cooldown: 2m
          idle_time: 10 minutes
        """,
    )
    assert problems(path) == [
        f"{path}:5: policy.idle_time: not a duration: '10 minutes' (use e.g. 90s, 10m, 2h)"
    ]


def test_missing_required_field_points_at_the_parent(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        instance: {id: a}
        controller: {url: "sqlite:///x.db"}
        providers:
          - name: p
            kind: hosts
            script: {path: /opt/p}
        """,
    )
    assert problems(path) == [f"{path}:6: providers[0].script.style: missing required field"]


def test_missing_section_points_at_the_top(tmp_path: Path) -> None:
    path = write(tmp_path, "# config\ninstance: {id: a}\n")
    assert problems(path) == [f"{path}:2: controller: missing required field"]


def test_duplicate_key_is_reported(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        MINIMAL,
        """
        policy:
          idle_time: 10m
          cooldown: 1m
          idle_time: 5m
        """,
    )
    [issue] = problems(path)
    assert issue.startswith(f"{path}:6: policy.idle_time: duplicate key (first at line 4")


def test_union_field_reports_the_branch_that_was_meant(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        MINIMAL,
        """
        providers:
          - name: p
            kind: hosts
            script: {style: v2, path: /opt/p}
            describe:
              cost_per_hour:
                t3.large: cheap
          - name: q
            kind: hosts
            script: {style: v2, path: /opt/q}
            describe: {cost_per_hour: cheap}
        """,
    )
    assert problems(path) == [
        f"{path}:9: providers[0].describe.cost_per_hour['t3.large']: expected a number, got 'cheap'",
        f"{path}:13: providers[1].describe.cost_per_hour: expected a number or a mapping, got 'cheap'",
    ]


def test_bad_name_and_bound_and_model_rule(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        instance: {id: "cloud a"}
        controller: {url: "sqlite:///x.db"}
        lease: {ttl: 3s, renew_every: 5s}
        budget: {max_spend: {amount: -1}}
        """,
    )
    lines = problems(path)
    assert lines[0].startswith(f"{path}:1: instance.id: not a valid name: 'cloud a' (letters, digits")
    assert lines[1:] == [
        f"{path}:3: lease: renew_every must be shorter than ttl",
        f"{path}:4: budget.max_spend.amount: must be at least 0, got -1",
    ]


def test_bad_controller_url_does_not_echo_the_url(tmp_path: Path) -> None:
    path = write(tmp_path, 'instance: {id: a}\ncontroller: {url: "https://admin:s3cret@ctl:443"}\n')
    [issue] = problems(path)
    assert issue.startswith(f"{path}:2: controller.url: not a controller URL (got scheme 'https'")
    assert "s3cret" not in issue


def test_unset_environment_variable_names_the_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROV_TEST_CTL", raising=False)
    path = write(tmp_path, 'instance: {id: a}\ncontroller:\n  url: "${PROV_TEST_CTL}"\n')
    assert problems(path) == [f"{path}:3: controller.url: environment variable PROV_TEST_CTL is not set"]


def test_environment_variables_are_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROV_TEST_HOSTS", "h1:2379,h2:2379")
    monkeypatch.setenv("PROV_TEST_ID", "cloud-b")
    path = write(
        tmp_path,
        """
        instance: {id: "${PROV_TEST_ID}"}
        controller: {url: "etcd://${PROV_TEST_HOSTS}"}
        providers:
          - name: p
            kind: hosts
            script: {style: v2, path: /opt/p, script_options: "--home=$${HOME}"}
        """,
    )
    cfg = load_config(path, check_files=False)
    assert cfg.instance.id == "cloud-b"
    assert cfg.controller.url == "etcd://h1:2379,h2:2379"
    assert cfg.providers[0].script.script_options == "--home=${HOME}"  # $${ is a literal ${


def test_value_from_the_environment_is_not_echoed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROV_TEST_SECRET", "hunter2")
    path = write(tmp_path, MINIMAL, 'budget: {max_hosts: "${PROV_TEST_SECRET}"}\n')
    [issue] = problems(path)
    assert issue == f"{path}:3: budget.max_hosts: expected an integer, got a value taken from the environment"


def test_several_errors_are_all_reported_in_file_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROV_TEST_UNSET", raising=False)
    path = write(
        tmp_path,
        """
        instance: {id: a, planer: true}
        controller: {url: "sqlite:///x.db"}
        policy:
          idle_time: soon
          idle_time: 5m
          cooldown: "${PROV_TEST_UNSET}"
        providers:
          - name: p
            kind: host
            script: {style: v2, path: /opt/p}
        """,
    )
    assert problems(path) == [
        f"{path}:1: instance.planer: unknown field (did you mean 'planner'?)",
        f"{path}:5: policy.idle_time: duplicate key (first at line 4; YAML would silently keep this one)",
        f"{path}:6: policy.cooldown: environment variable PROV_TEST_UNSET is not set",
        f"{path}:9: providers[0].kind: expected one of 'hosts', 'units', got 'host'",
    ]


def test_empty_section_means_its_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        MINIMAL,
        """
        policy:
          # idle_time: 10m
        providers:
        """,
    )
    cfg = load_config(path, check_files=False)
    assert cfg.policy.idle_time == 600.0
    assert cfg.providers == []


def test_empty_required_section_is_still_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "instance:\ncontroller: {url: 'sqlite:///x.db'}\n")
    assert problems(path) == [f"{path}:1: instance: expected a mapping, got nothing"]


def test_merge_keys_work_and_are_not_duplicates(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        MINIMAL,
        """
        providers:
          - name: p
            kind: hosts
            script: &v2 {style: v2, path: /opt/p, timeout: 30s}
          - name: q
            kind: hosts
            script: {<<: *v2, path: /opt/q}
        """,
    )
    cfg = load_config(path, check_files=False)
    scripts = [(p.script.path, p.script.timeout) for p in cfg.providers]
    assert scripts == [(Path("/opt/p"), 30.0), (Path("/opt/q"), 30.0)]


def test_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    rows = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    rows += [f"{n}: &{n} [{', '.join(['*' + p] * 10)}]" for p, n in zip("abcdefgh", "bcdefghi")]
    path = write(tmp_path, "\n".join(rows) + "\n")
    [issue] = problems(path)
    assert issue == f"{path}:1: more than 100000 values once YAML aliases are expanded"


def test_non_text_key_in_a_mapping_of_names(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        MINIMAL,
        """
        providers:
          - name: p
            kind: hosts
            script: {style: v2, path: /opt/p}
            describe:
              cost_per_hour: {1: 0.5}
        """,
    )
    assert problems(path) == [f"{path}:8: providers[0].describe.cost_per_hour[1]: keys here must be text, got 1"]


@pytest.mark.parametrize("lease,ttl,renew_every", [
    ("{ttl: 3s}", 3.0, 1.0),            # renew_every left out fits a short ttl
    ("{ttl: 2s}", 2.0, 2 / 3),
    ("{ttl: 5s}", 5.0, 3.0),            # ... and stays 3s where 3s fits
    ("{renew_every: 15s}", 45.0, 15.0),  # ttl left out fits a long renew_every
    ("{renew_every: 2s}", 10.0, 2.0),
    ("{}", 10.0, 3.0),
])
def test_a_lease_default_never_clashes_with_the_value_given(tmp_path: Path, lease: str, ttl: float,
                                                            renew_every: float) -> None:
    cfg = load_config(write(tmp_path, MINIMAL, f"lease: {lease}\n"), check_files=False)
    assert (cfg.lease.ttl, cfg.lease.renew_every) == pytest.approx((ttl, renew_every))
