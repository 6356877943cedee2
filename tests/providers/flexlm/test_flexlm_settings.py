"""The provider's settings: what a good file gives, and that every mistake names its key (exit 78)."""

from __future__ import annotations

import json

import pytest

from providers.flexlm import settings
from providers.flexlm.errors import ConfigError

GOOD = {
    "lmutil": "/opt/flexlm/lmutil",
    "server": "27000@lic1",
    "cluster": "site-a",
    "hosts": ["cn*", "GPU-[0-9]*"],
    "ledger": "sqlite:///srv/licpool/ledger.db",
    "features": [{"feature": "VCSRuntime_Net", "resource": "vcs", "pool": 40, "step": 2, "min_hold": "15m"}],
}


def with_(**changes):
    return {**GOOD, **changes}


def test_a_good_file_from_the_environment(tmp_path):
    path = tmp_path / "flexlm.yaml"
    path.write_text(json.dumps(GOOD))
    s = settings.load({settings.ENV: str(path)})
    assert s.license_spec == "27000@lic1"
    assert s.hosts == ["cn*", "gpu-[0-9]*"]
    (f,) = s.features
    assert (f.pool, f.step, f.min_hold, f.pool_key) == (40, 2, 900.0, "VCSRuntime_Net")
    assert s.feature("vcs") is f


def test_a_triad_is_three_servers_joined_for_lmstat():
    s = settings.parse(with_(server=["27000@lic1", "27000@lic2", "27000@lic3"]))
    assert s.license_spec == "27000@lic1,27000@lic2,27000@lic3"


@pytest.mark.parametrize("data, says", [
    (with_(sever="27000@lic1"), "sever: unknown key"),
    ({k: v for k, v in GOOD.items() if k != "ledger"}, "ledger: missing required key"),
    (with_(server="lic1:27000"), "server: expected PORT@HOST"),
    (with_(server=["27000@lic1", "27000@lic2"]), "server: a list names the three servers of a triad, got 2"),
    (with_(cluster="site a"), "cluster: not a cluster name"),
    (with_(hosts=[]), "hosts: "),
    (with_(ledger="mysql://db/x"), "ledger: expected sqlite:///PATH or etcd://HOST:PORT/PREFIX"),
    (with_(ledger="sqlite://relative.db"), "ledger: expected sqlite:///ABSOLUTE/PATH/TO/FILE"),
    (with_(ledger="etcd://u:p@etcd1:2379/x"), "ledger: user names and passwords in the ledger URL are not supported"),
    (with_(features=[{**GOOD["features"][0], "pool": -1}]), "features[0].pool: "),
    (with_(features=[{**GOOD["features"][0], "min_hold": "15 minutes"}]), "features[0].min_hold: not a duration"),
    (with_(features=[{**GOOD["features"][0], "pooll": 4}]), "features[0].pooll: unknown key"),
    (with_(features=[GOOD["features"][0], {**GOOD["features"][0], "feature": "Other"}]),
     "features[1].resource: 'vcs' is named twice"),
])
def test_each_mistake_names_its_key(data, says):
    with pytest.raises(ConfigError) as caught:
        settings.parse(data, "flexlm.yaml")
    assert caught.value.exit_code == 78
    assert str(caught.value).startswith(f"settings flexlm.yaml: {says}"), str(caught.value)


def test_a_missing_variable_file_or_bad_yaml_is_a_configuration_error(tmp_path):
    with pytest.raises(ConfigError, match="FLEXLM_PROVIDER_CONFIG is not set"):
        settings.load({})
    with pytest.raises(ConfigError, match="cannot read"):
        settings.load({settings.ENV: str(tmp_path / "nothing.yaml")})
    bad = tmp_path / "bad.yaml"
    bad.write_text("lmutil: [unclosed\n")
    with pytest.raises(ConfigError, match="not YAML or JSON"):
        settings.load({settings.ENV: str(bad)})


def test_a_resource_the_settings_do_not_lend_is_a_configuration_error():
    with pytest.raises(ConfigError, match="no feature is lent as resource 'matlab'"):
        settings.parse(GOOD).feature("matlab")
