"""Every bound the server enforces on a request is stated in `/openapi.json`, from the same
declaration that enforces it: a generated client never sends what the document calls valid and
the server refuses."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from control_plane.api.limits import AGENT_TEXT, STORABLE_TEXT_PATTERN
from control_plane.events.services import KIND_PATTERN
from control_plane.forecast.services import DAY_PATTERN
from control_plane.notifications.services import MAX_PAGE
from ground.contract.messages import AGENT_TEXT_MARK
from ground.instants import RFC_3339_PATTERN
from tests.control_plane.conftest import Api, Org


def _document(api: Api) -> dict[str, Any]:
    with api.client() as client:
        document: dict[str, Any] = client.get("/openapi.json").json()
    return document


def _parameter(document: dict[str, Any], path: str, name: str) -> dict[str, Any]:
    (found,) = [p for p in document["paths"][path]["get"]["parameters"] if p["name"] == name]
    schema: dict[str, Any] = found["schema"]
    return schema


def _strings(item: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(item, dict):
        if item.get("type") == "string":
            yield where, item
        for key, inner in item.items():
            yield from _strings(inner, f"{where}.{key}")
    elif isinstance(item, list):
        for index, inner in enumerate(item):
            yield from _strings(inner, f"{where}[{index}]")


def test_the_notifications_page_states_its_bounds(api: Api, make_org: Callable[..., Org]) -> None:
    schema = _parameter(_document(api), "/v1/notifications", "limit")
    assert (schema["minimum"], schema["maximum"]) == (1, MAX_PAGE)
    with api.client(make_org().panel_key) as client:
        below = client.get("/v1/notifications", params={"limit": 0})
        above = client.get("/v1/notifications", params={"limit": MAX_PAGE + 1})
        edge = client.get("/v1/notifications", params={"limit": MAX_PAGE})
    for refused, value in ((below, 0), (above, MAX_PAGE + 1)):
        assert refused.status_code == 422
        assert refused.json()["detail"]["message"].startswith(f"limit: {value} is out of range")
    assert edge.status_code == 200


def test_the_trails_instants_state_the_form_parse_instant_takes(api: Api) -> None:
    document = _document(api)
    for name in ("since", "until"):
        schema = _parameter(document, "/v1/admin/events", name)
        # Stated beside the `anyOf` of string and null: a string must match, null is untouched.
        assert schema["format"] == "date-time"
        assert schema["pattern"] == RFC_3339_PATTERN


def test_every_free_string_states_that_a_nul_is_refused(api: Api) -> None:
    document = _document(api)
    free = [
        where
        for where, schema in _strings(document["paths"], "paths")
        if "pattern" not in schema
        and "enum" not in schema
        and "const" not in schema
        and AGENT_TEXT_MARK not in schema
        and schema.get("format") not in {"binary", "uuid", "date", "date-time"}
    ]
    free += [
        where
        for where, schema in _strings(document["components"]["schemas"], "components")
        if "pattern" not in schema
        and "enum" not in schema
        and "const" not in schema
        and AGENT_TEXT_MARK not in schema
        and schema.get("format") not in {"binary", "uuid", "date", "date-time"}
    ]
    assert free == []
    assert re.fullmatch(STORABLE_TEXT_PATTERN, "a\x00b") is None
    assert re.fullmatch(STORABLE_TEXT_PATTERN, "plain text, ünïcode 🌙") is not None


def test_the_agent_text_the_document_marks_is_the_text_the_door_lets_a_nul_through(
    api: Api,
) -> None:
    document = _document(api)
    marked = sorted(
        where
        for where, schema in _strings(document["components"]["schemas"], "components")
        if schema.get(AGENT_TEXT_MARK) is True
    )
    assert marked == [
        "components.OutcomeReport.properties.error.anyOf[0]",
        "components.UnreachableReport.properties.error",
    ]
    bodies = {
        (method, path): operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        for method, path, operation in (
            (method.upper(), path, operation)
            for path, item in document["paths"].items()
            for method, operation in item.items()
        )
        if (method, path) in AGENT_TEXT
    }
    assert bodies == {
        ("PATCH", "/v1/agent/runs/{run_id}"): "#/components/schemas/OutcomeReport",
        ("POST", "/v1/agent/unreachable"): "#/components/schemas/UnreachableReport",
    }
    assert set(AGENT_TEXT.values()) == {frozenset({"error"})}


@pytest.mark.parametrize("path", ["/v1/forecast", "/v1/admin/forecast"])
def test_the_forecast_day_states_its_pattern(api: Api, path: str) -> None:
    schema = _parameter(_document(api), path, "date")
    assert (schema["format"], schema["pattern"]) == ("date", DAY_PATTERN)


def test_the_trails_kind_states_it_is_not_blank(api: Api, operator_key: str) -> None:
    """A blank kind matched no event and the trail came back empty, as if nothing happened: it
    is refused naming the field, and the document says so."""
    schema = _parameter(_document(api), "/v1/admin/events", "kind")
    assert [branch.get("pattern") for branch in schema["anyOf"]] == [KIND_PATTERN, None]
    with api.client(operator_key) as client:
        for blank in ("", " "):
            refused = client.get("/v1/admin/events", params={"kind": blank})
            assert refused.status_code == 422, refused.text
            assert refused.json()["detail"]["message"].startswith("kind: "), refused.text
        assert client.get("/v1/admin/events", params={"kind": "credential."}).status_code == 200
