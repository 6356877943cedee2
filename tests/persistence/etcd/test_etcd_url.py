"""``etcd://`` URLs: members, namespace, TLS files, timeout; clear errors that show no credential."""

from __future__ import annotations

import pytest

from lease.etcd_client import EtcdTarget
from persistence.controller import open_controller

pytestmark = pytest.mark.slow


def test_members_namespace_and_defaults() -> None:
    t = EtcdTarget.from_url("etcd://etcd1:2379,10.0.0.2:32379,[fd00::3],etcd4")
    assert t.endpoints == (("etcd1", 2379), ("10.0.0.2", 32379), ("fd00::3", 2379), ("etcd4", 2379))
    assert t.namespace == "provisioner" and t.timeout == 2.0 and not t.tls
    assert t.location == "etcd://etcd1:2379,10.0.0.2:32379,[fd00::3]:2379,etcd4:2379/provisioner"


def test_tls_files_and_timeout() -> None:
    t = EtcdTarget.from_url(
        "etcd://e1:2379/prod/cloud?ca=/etc/ssl/ca.pem&cert=/etc/p/c.pem&key=/etc/p/k.pem&timeout=0.5")
    assert (t.namespace, t.ca, t.cert, t.key, t.timeout) == ("prod/cloud", "/etc/ssl/ca.pem", "/etc/p/c.pem",
                                                             "/etc/p/k.pem", 0.5)
    assert t.tls and t.location == "etcds://e1:2379/prod/cloud"


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("etcd://", "endpoint '' is not HOST:PORT"),
        ("etcd://h1:2379,,h2:2379", "endpoint '' is not HOST:PORT"),
        ("etcd://h1:http", "is not HOST:PORT"),
        ("etcd://h1:0", "port out of range"),
        ("etcd://h1:2379/bad namespace", "namespace"),
        ("etcd://h1:2379?tls=yes", "unknown parameter 'tls'"),
        ("etcd://h1:2379?cert=/c.pem", "needs both cert= and key="),
        ("etcd://h1:2379?timeout=soon", "not a number of seconds"),
        ("etcd://h1:2379?timeout=-1", "positive number of seconds"),
        ("etcd://h1:2379?ca=", "exactly one non-empty value"),
    ],
)
def test_bad_urls_are_refused_naming_the_problem(url: str, words: str) -> None:
    with pytest.raises(ValueError, match=words) as err:
        open_controller(url)
    assert url.split("?")[0] in str(err.value)


def test_credentials_are_refused_without_being_echoed() -> None:
    with pytest.raises(ValueError, match="client certificate") as err:
        EtcdTarget.from_url("etcd://root:s3cret@h1:2379,h2:2379/ns?password=s3cret")
    assert "s3cret" not in str(err.value) and "root" not in str(err.value)
    assert "etcd://h1:2379,h2:2379/ns" in str(err.value)
