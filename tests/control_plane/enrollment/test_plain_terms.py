"""An enrollment token's label and name pattern are text a person types and others read (the
tokens' list, the panel, the trail): like a name, neither holds a control character nor a
bidirectional control ("web servers" + U+202E would turn the rest of its line around). Through
each door (the operators' API, an organisation's API, the command line, the service the panel
calls) the refusal names the field and the character, and no token is made."""

from __future__ import annotations

from uuid import UUID

import pytest

from control_plane.enrollment.rules import TokenTerms
from control_plane.errors import InvalidInput
from tests.control_plane.conftest import table_rows
from tests.control_plane.enrollment.conftest import Enrollment
from tests.control_plane.test_cli import run_control

WATCHED = ("enrollment_tokens", "events", "agents", "credentials")

CHARACTERS = [
    pytest.param("\u202e", "the bidirectional control U+202E", id="right_to_left_override"),
    pytest.param("\u2067", "the bidirectional control U+2067", id="right_to_left_isolate"),
    pytest.param("\x1b", "the control character U+001B", id="escape"),
]
FIELDS = [
    pytest.param("label", "web servers{}, December", id="label"),
    pytest.param("name_pattern", "web-{}*", id="name_pattern"),
]


@pytest.mark.parametrize(("field", "template"), FIELDS)
@pytest.mark.parametrize(("character", "named"), CHARACTERS)
@pytest.mark.parametrize("door", ["operator", "panel"])
def test_the_api_refuses_a_label_or_pattern_with_a_control_naming_field_and_character(
    world: Enrollment, door: str, field: str, template: str, character: str, named: str
) -> None:
    before = table_rows(world.pool, WATCHED)
    if door == "operator":
        key, path, body = (
            world.operator_key,
            "/v1/admin/enrollment-tokens",
            {"org_id": world.org.org_id},
        )
    else:
        key, path, body = world.org.panel_key, "/v1/enrollment-tokens", {}
    with world.api.client(key) as client:
        answer = client.post(path, json={**body, field: template.format(character)})
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert detail["message"].startswith(f"{field}: "), detail
    if character != "\x1b":
        # A control character is refused by the document's pattern already (the message quotes
        # the value and the pattern); a bidirectional control by the service, naming it.
        assert named in detail["message"], detail["message"]
    assert table_rows(world.pool, WATCHED) == before


@pytest.mark.parametrize(("field", "template"), FIELDS)
@pytest.mark.parametrize(("character", "named"), CHARACTERS)
def test_the_service_the_panel_calls_refuses_them_too(
    world: Enrollment, field: str, template: str, character: str, named: str
) -> None:
    before = table_rows(world.pool, WATCHED)
    with pytest.raises(InvalidInput) as refused:
        world.token(**{field: template.format(character)})
    assert refused.value.fields["field"] == field
    assert named in str(refused.value)
    if character != "\x1b":
        assert str(refused.value).endswith("would show the text after it in another order)")
    assert table_rows(world.pool, WATCHED) == before


def test_a_plain_label_and_pattern_are_kept_trimmed(world: Enrollment) -> None:
    issued = world.token(label="  web servers  ", name_pattern=" web-* ")
    assert (issued.token.label, issued.token.name_pattern) == ("web servers", "web-*")
    assert TokenTerms(label="Zürich — שרתים").label == "Zürich — שרתים"


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--label", "--name-pattern"])
def test_the_command_line_refuses_a_bidi_control_in_one_line(
    world: Enrollment, database_url: str, flag: str
) -> None:
    before = table_rows(world.pool, WATCHED)
    made = run_control(
        "enrollment-token", "create", "--org", str(UUID(world.org.org_id)),
        flag, "web-\u202e*", "--database-url", database_url,
    )  # fmt: skip
    assert made.returncode != 0
    assert "U+202E" in made.stderr, made.stderr
    assert "Traceback" not in made.stderr
    assert len(made.stderr.strip().splitlines()) == 1, made.stderr
    assert table_rows(world.pool, WATCHED) == before
