"""`/openapi.json` is a contract a panel team generates a client from: every operation declares
the schema of its success and of every error it can answer, and its bearer scheme; and the
running API keeps that promise for generated requests (schemathesis, every check on: the
answers' schemas, valid requests accepted and invalid ones refused, `Allow` on a 405, credentials
enforced)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, assume, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.config import GenerationConfig

from control_plane.enrollment.rules import MAX_USES, TokenTerms
from control_plane.events.trail import Actor
from ground.contract import ENROLL_PATH
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease
from tests.worlds.clocks import ManualClock

# Answers without a body: 304 (config unchanged), 204 (webhook deleted), 416 (range).
BODILESS = {"204", "304", "416"}
UNAUTHENTICATED = {("GET", "/healthz")}
# The host's exchange takes an enrollment token, which is no audience's key: nothing is a 403.
NO_OTHER_AUDIENCE = {("POST", ENROLL_PATH)}
SCHEMES = {"panel", "agent", "operator", "enrollment"}
# Valid requests, and requests that break the document's rules: a 500 for either is a defect.
MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
# Every check schemathesis has (`--checks all`).
load_all_checks()
ALL_CHECKS = CHECKS.get_all()
# Rules no JSON Schema states, each a check left off for its operation until the document can say
# it: a field required or refused by another's value, an order between two fields, the stored
# state or the clock. Listed so that a new gap fails the test, and an entry goes once it closes.
_ACCEPTS_VALID = "positive_data_acceptance"
_UNKNOWN_QUERY = "a query parameter the route does not know is ignored, not refused"
GAPS: dict[tuple[str, str], dict[str, str]] = {
    ("POST", "/v1/agent/claims"): {_ACCEPTS_VALID: "exactly one of slot_key and manual_run_id"},
    ("POST", "/v1/agent/runs"): {_ACCEPTS_VALID: "the slot must have opened (the clock)"},
    ("PATCH", "/v1/agent/runs/{run_id}"): {
        _ACCEPTS_VALID: "delivery.fallback_reason only with delivery.kind full"
    },
    ("POST", "/v1/agent/unreachable"): {
        _ACCEPTS_VALID: "one of the agent's slots, opened, at most 7 days old, tries in its window"
    },
    ("POST", ENROLL_PATH): {_ACCEPTS_VALID: "the name must be free in the organisation"},
    ("POST", "/v1/admin/enrollment-tokens"): {
        _ACCEPTS_VALID: "org_id must name an organisation (stored state)"
    },
    ("POST", "/v1/admin/credentials"): {
        _ACCEPTS_VALID: "org_id required for a panel credential, refused for an operator one"
    },
    ("POST", "/v1/admin/releases"): {_ACCEPTS_VALID: "the signature must verify"},
    ("POST", "/v1/admin/trust-roots"): {
        _ACCEPTS_VALID: "a signed root that chains from the newest stored (stored state)"
    },
    ("POST", "/v1/admin/releases/rollback"): {
        _ACCEPTS_VALID: "the pair must offer a release, and an older one signed as a downgrade"
    },
    ("PUT", "/v1/admin/brake"): {_ACCEPTS_VALID: "a reason is required to engage it"},
    ("PUT", "/v1/admin/releases/{release_id}/brake"): {
        _ACCEPTS_VALID: "a reason is required to engage it"
    },
    ("PUT", "/v1/admin/settings"): {
        _ACCEPTS_VALID: "org_cap at most global_cap; a time zone the host knows"
    },
    ("PATCH", "/v1/admin/rollout/settings"): {
        _ACCEPTS_VALID: "an integer written as 628.0 is refused (strict integers)"
    },
    ("POST", "/v1/admin/releases/{release_id}/promote"): {
        _ACCEPTS_VALID: "the wave must come after the release's own, within the plan (stored"
        " state); an integer written as 3.0 is refused (strict integers)"
    },
    ("PUT", "/v1/agent/hold"): {_ACCEPTS_VALID: "until must be after now (the clock)"},
    ("GET", "/v1/admin/events"): {_ACCEPTS_VALID: "until must be after since"},
    ("PUT", "/v1/agents/{agent_id}/hold"): {_ACCEPTS_VALID: "until must be after now (the clock)"},
    ("PUT", "/v1/agents/{agent_id}/schedule"): {_ACCEPTS_VALID: "an enabled schedule needs a time"},
    ("PUT", "/v1/default-schedule"): {_ACCEPTS_VALID: "an enabled schedule needs a time"},
    ("PUT", "/v1/webhook"): {_ACCEPTS_VALID: "url is required (null only in the answer)"},
}


def _checks(operation: Any) -> list[Any]:
    left_off = dict(GAPS.get((operation.method.upper(), operation.path), {}))
    if list(operation.query):
        # Every route with a query: an invalid request made of an unknown parameter is answered.
        left_off["negative_data_rejection"] = _UNKNOWN_QUERY
    return [check for check in ALL_CHECKS if check.__name__ not in left_off]


# The coverage phase's boundary cases (each bound's edges, every other method on each path) are
# many per operation: the first of them each run, the same ones every time.
MAX_COVERAGE_CASES = 20


def _document(api: Api) -> dict[str, Any]:
    with api.client() as client:
        document: dict[str, Any] = client.get("/openapi.json").json()
    return document


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ]


def test_every_answer_of_every_operation_has_a_schema(api: Api) -> None:
    document = _document(api)
    missing = []
    for method, path, operation in _operations(document):
        responses = operation["responses"]
        successes = [status for status in responses if status.startswith("2")]
        if not successes:
            missing.append(f"{method} {path}: no success answer")
        for status, answer in responses.items():
            if status in BODILESS:
                continue
            schemas = [media.get("schema") for media in answer.get("content", {}).values()]
            if not schemas or not all(schemas):
                missing.append(f"{method} {path} {status}: no schema")
        if (method, path) in UNAUTHENTICATED:
            continue
        for status in ("401", "403", "503"):
            if status == "403" and (method, path) in NO_OTHER_AUDIENCE:
                continue
            if status not in responses:
                missing.append(f"{method} {path}: {status} not declared")
        if "422" in responses and "HTTPValidationError" in str(responses["422"]):
            missing.append(f"{method} {path}: 422 is FastAPI's default, not the ErrorAnswer")
    assert missing == []


def test_every_credentialed_operation_names_its_bearer_scheme(api: Api) -> None:
    document = _document(api)
    schemes = document["components"]["securitySchemes"]
    assert set(schemes) == SCHEMES
    assert {(s["type"], s["scheme"]) for s in schemes.values()} == {("http", "bearer")}
    unnamed = [
        f"{method} {path}"
        for method, path, operation in _operations(document)
        if (method, path) not in UNAUTHENTICATED
        and [name for entry in operation.get("security", []) for name in entry] == []
    ]
    assert unnamed == []
    assert document["paths"]["/v1/agent/claims"]["post"]["security"] == [{"agent": []}]


# Every operation, both phases, every check: 90 s on a quiet machine, several minutes on a busy
# one. The suite's 300 s would interrupt it inside a Hypothesis run, which reports the
# interruption as an "unreliable" operation instead of a timeout; this is a deadline for a hang.
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_generated_requests_get_the_answers_the_document_promises(
    api: Api,
    operator_key: str,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    clock: ManualClock,
) -> None:
    del published
    org = make_org()
    agent = make_agent(org)
    enrollment = api.services.enrollment.create(
        UUID(org.org_id),
        TokenTerms(uses=MAX_USES),
        now=clock.now(),
        actor=Actor(kind="operator", name="tests"),
    )
    keys = {
        "panel": org.panel_key,
        "agent": agent.agent_key,
        "operator": operator_key,
        "enrollment": enrollment.secret,
    }
    document = _document(api)
    schema = schemathesis.openapi.from_dict(document)
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        declared = document["paths"][operation.path][operation.method.lower()]
        security = declared.get("security", [])
        # An operation that takes no input has no invalid request to make.
        takes_input = bool(declared.get("parameters") or declared.get("requestBody"))
        names = [name for entry in security for name in entry]
        headers = {"Authorization": f"Bearer {keys[names[0]]}"} if names else {}

        modes = list(MODES if takes_input else MODES[:1])
        for mode in modes:
            try:
                _exchange(operation, api.base_url, headers, mode)
            # schemathesis reports its findings as a FailureGroup (a BaseExceptionGroup).
            except (Exception, BaseExceptionGroup) as exc:  # every operation is tried
                name = f"{operation.method.upper()} {operation.path} ({mode.value})"
                failures.append(f"{name}: {exc}"[:3000])
        failures.extend(_boundaries(schema, operation, api.base_url, headers, modes))
    assert failures == [], "\n\n".join(failures)


def _boundaries(
    schema: Any, operation: Any, base_url: str, headers: dict[str, str], modes: list[Any]
) -> list[str]:
    """The coverage phase: each declared bound at its edges and just past them, and the methods
    the path does not have — each answer checked, the failures listed."""
    failures = []
    cases = schema.iter_coverage_cases(
        operation, generation_modes=modes, generation_config=GenerationConfig()
    )
    for number, case in enumerate(cases):
        if number == MAX_COVERAGE_CASES:
            break
        if any(name.lower() in _FRAMING_HEADERS for name in case.headers or {}):
            continue
        try:
            response = case.call(base_url=base_url, headers=headers, timeout=30)
            case.validate_response(response, checks=_checks(operation))
        except (Exception, BaseExceptionGroup) as exc:  # every case is tried
            name = f"{case.method.upper()} {case.formatted_path} (coverage)"
            failures.append(f"{name}: {exc}"[:3000])
    return failures


_FRAMING_HEADERS = frozenset(
    {"content-length", "transfer-encoding", "host", "connection", "expect", "upgrade", "te"}
)


def _exchange(operation: Any, base_url: str, headers: dict[str, str], mode: GenerationMode) -> None:
    """At most 20 generated requests, the same ones every run, each answer checked."""

    @settings(
        max_examples=20,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def exchange(case: schemathesis.Case) -> None:
        # A generated header that frames the message itself (`Content-Length: attempt`) makes a
        # request the HTTP server refuses before any route sees it (uvicorn's 400): a test of
        # the server's parser, not of the document's answers.
        assume(not any(name.lower() in _FRAMING_HEADERS for name in case.headers or {}))
        response = case.call(base_url=base_url, headers=headers, timeout=30)
        case.validate_response(response, checks=_checks(operation))

    exchange()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        pytest.param("GET", "/v1/agents", id="panel_list"),
        pytest.param("GET", "/v1/agent/config", id="agent_config"),
        pytest.param("GET", "/v1/admin/settings", id="operator_settings"),
    ],
)
def test_a_missing_credential_is_still_a_401_with_a_message(
    api: Api, method: str, path: str
) -> None:
    with httpx.Client(base_url=api.base_url) as client:
        response = client.request(method, path)
    assert response.status_code == 401
    assert "bearer credential is required" in response.json()["detail"]
