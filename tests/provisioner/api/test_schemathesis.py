"""Generated requests from the OpenAPI document against a real daemon: never a 5xx, always the documented shape.

Bounded: a dozen valid and invalid examples per operation, no deadline (the
daemon is real), one daemon. Each case carries the token of a role that may
call its operation, so the generated data reaches the handlers; a case whose
invalid part is its Authorization header (missing or malformed) keeps it, and
must be refused. (Driven from
a plain test: schemathesis' own pytest loader does not work with pytest 9.)

Every check runs but one: schema-valid data may still be refused with 422
when it breaks a rule a schema cannot state (a demand with two items of one
id, an ``after`` cursor naming no row).
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.support.api import TOKENS, Api, write_tokens
from tests.support.daemons import HOSTS_SIM, make_config, sim_provider

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("schema")
    # No planner: generated demand is stored and served, not turned into requests to the provider.
    cfg = make_config(tmp, [sim_provider(tmp, "hosts", HOSTS_SIM)],
                      api={"listen": "127.0.0.1:0", "tokens": str(write_tokens(tmp / "tokens.yaml"))})
    cfg = cfg.model_copy(update={"instance": cfg.instance.model_copy(update={"planner": False})})
    run = Api(cfg, tmp / "home")
    yield run
    run.stop()


def role_for(method: str, path: str) -> str:
    if method == "GET":
        return "viewer"
    if path.startswith(("/v1/demand", "/v1/hosts")):
        return "scheduler"
    return "operator"


def _with_token(case: schemathesis.Case, token: dict[str, str]) -> dict[str, str] | None:
    """The role's token, unless the case is about a missing or malformed Authorization header."""
    components = case.meta.components if case.meta is not None else {}
    header = next((info for where, info in components.items() if getattr(where, "value", where) == "header"), None)
    return None if header is not None and header.mode == GenerationMode.NEGATIVE else token


def test_generated_requests_get_no_server_error(daemon):
    schema = schemathesis.openapi.from_url(f"{daemon.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    for op in operations:
        headers = {"Authorization": f"Bearer {TOKENS[role_for(op.method.upper(), op.path)][1]}"}
        cases = st.one_of(op.as_strategy(GenerationMode.POSITIVE), op.as_strategy(GenerationMode.NEGATIVE))

        @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(case=cases)
        def check(case: schemathesis.Case) -> None:
            case.call_and_validate(headers=_with_token(case, headers), excluded_checks=[positive_data_acceptance])

        check()
