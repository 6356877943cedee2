"""Who may do what: 401 without a known token, 403 for the wrong role, read-only without tokens."""

from __future__ import annotations

import logging
import re

import pytest

from provisioner.api.auth import TokensError, load_tokens
from provisioner.api.server import ApiStartError
from provisioner.daemon.root import Daemon
from tests.support.api import TOKENS, write_tokens
from tests.support.daemons import make_config

pytestmark = pytest.mark.slow

#: What each role may do beyond reading; every other mutation is refused 403.
MAY = {"viewer": set(), "operator": {"steer"}, "scheduler": {"feed"}}
OPEN = {"/healthz", "/readyz", "/openapi.json"}


def operations(api) -> list[tuple[str, str, str]]:
    """(method, concrete path, permission) for every operation in the OpenAPI document."""
    doc = api.ok("GET", "/openapi.json", None)
    out = []
    for path, methods in doc["paths"].items():
        concrete = re.sub(r"\{[^}]+\}", "x", path)
        for method in methods:
            if method == "get":
                need = "read"
            elif path.startswith(("/v1/demand", "/v1/hosts", "/v1/supply")):
                need = "feed"
            else:
                need = "steer"
            out.append((method.upper(), concrete, need))
    return out


def test_every_operation_checks_the_token_and_the_role(start_api):
    api = start_api()
    ops = operations(api)
    assert len(ops) >= 20
    for method, path, need in ops:
        if path in OPEN:
            continue
        r = api.call(method, path, role=None, json={})
        assert r.status_code == 401, (method, path, r.text)
        assert r.json()["error"].startswith("missing bearer token") and r.headers["www-authenticate"] == "Bearer"
        r = api.call(method, path, role=None, json={}, headers={"Authorization": "Bearer not-a-known-token-at-all"})
        assert r.status_code == 401 and r.json()["error"] == "unknown token", (method, path)
        r = api.call(method, path, role=None, json={}, headers={"Authorization": f"Basic {TOKENS['viewer'][1]}"})
        assert r.status_code == 401, "only bearer tokens are accepted"
        for role, (name, _) in TOKENS.items():
            r = api.call(method, path, role=role, json={})
            allowed = need == "read" or need in MAY[role]
            if allowed:
                assert r.status_code not in (401, 403), (role, method, path, r.text)
            else:
                assert r.status_code == 403, (role, method, path, r.text)
                assert f"role {role} ({name}) may not" in r.json()["error"]
    for path in OPEN:
        assert api.get(path, role=None).status_code == 200


def test_without_tokens_reads_are_open_on_loopback_and_mutations_refused(start_api, tmp_path):
    api = start_api(tokens=False)
    assert api.get("/v1/providers", role=None).status_code == 200
    assert api.get("/metrics", role=None).status_code == 200
    for method, path in (("PUT", "/v1/demand"), ("POST", "/v1/providers/hosts/pause"),
                         ("POST", "/v1/hosts/h-1/events"), ("POST", "/v1/instances/x/return")):
        r = api.call(method, path, role=None, json={"items": []})
        assert r.status_code == 403 and "no tokens configured (api.tokens)" in r.json()["error"], (method, path)
    assert api.controller.get_demand() is None

    cfg = make_config(tmp_path, [], instance="wide", api={"listen": "0.0.0.0:0"})
    with pytest.raises(ApiStartError, match="not a loopback address: without api.tokens"):
        Daemon(cfg, tmp_path / "wide", serve_api=True).start()


def test_tokens_file_must_be_private_and_well_formed(tmp_path):
    loose = write_tokens(tmp_path / "loose.yaml", mode=0o644)
    with pytest.raises(TokensError, match=r"mode 0644 is too open, use 0600 \(chmod 600 .*loose.yaml\)"):
        load_tokens(loose)
    cfg = make_config(tmp_path, [], api={"listen": "127.0.0.1:0", "tokens": str(loose)})
    with pytest.raises(TokensError, match="too open"):
        Daemon(cfg, tmp_path / "h", serve_api=True).start()

    bad = tmp_path / "bad.yaml"
    bad.write_text("tokens:\n- {name: ops, role: operator, token: short-secret}\n"
                   "- {name: boss, role: admin, token: a-long-enough-token-value}\n")
    bad.chmod(0o600)
    with pytest.raises(TokensError) as err:
        load_tokens(bad)
    assert "tokens['ops'].token" in str(err.value) and "short-secret" not in str(err.value)
    bad.write_text("tokens:\n- {name: boss, role: admin, token: a-long-enough-token-value}\n")
    with pytest.raises(TokensError, match=r"tokens\['boss'\].role"):
        load_tokens(bad)
    bad.write_text("tokens:\n- {name: a, role: viewer, token: same-token-value-here}\n"
                   "- {name: b, role: operator, token: same-token-value-here}\n")
    with pytest.raises(TokensError, match="share one token value") as err:
        load_tokens(bad)
    assert "same-token-value-here" not in str(err.value)


def test_tokens_never_reach_logs_or_facts(start_api, caplog):
    caplog.set_level(logging.DEBUG)
    api = start_api()
    api.demand_round()
    api.ok("POST", "/v1/providers/hosts/pause", "operator", json={"reason": "window"})
    api.call("GET", "/v1/providers", role=None, headers={"Authorization": "Bearer wrong-token-value-xyz"})
    facts = b"".join(f.to_json() for f in api.controller.read())
    audit = (api.daemon.home / "audit.log").read_text()
    for _, token in TOKENS.values():
        assert token not in caplog.text and token.encode() not in facts and token not in audit
    assert "wrong-token-value-xyz" not in caplog.text
    assert "api: ops: pause of hosts recorded" in caplog.text, "the log names the caller, never the token"
    assert "provider_paused" in audit


def test_tls_when_configured(start_api, tmp_path):
    import ssl
    import subprocess

    import httpx

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    key.chmod(0o600)
    api = start_api(providers=[], api={"tls": {"cert": str(cert), "key": str(key)}})
    assert api.url.startswith("https://127.0.0.1:")
    r = httpx.get(f"{api.url}/v1/providers", verify=ssl.create_default_context(cafile=str(cert)),
                  headers={"Authorization": f"Bearer {TOKENS['viewer'][1]}"})
    assert r.status_code == 200 and r.json() == {"items": [], "next": None}
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{api.url}/healthz")  # an unknown certificate is not trusted
    plain = api.url.replace("https://", "http://")
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{plain}/healthz")

    bad = make_config(tmp_path, [], instance="t2", api={"listen": "127.0.0.1:0", "tls": {"cert": str(key),
                                                                                       "key": str(key)}})
    with pytest.raises(ApiStartError, match="api.tls: cannot load the certificate or key"):
        Daemon(bad, tmp_path / "t2", serve_api=True).start()
