"""A reason a person must give (to halt, promote, force, withdraw, roll back, engage a brake) is
refused when missing or blank, naming the field, the value and what it is required for; a given
one is kept as typed, under the same storable-text rules as any other free text."""

from __future__ import annotations

import pytest

from control_plane.errors import InvalidInput
from control_plane.inputs import required_text


def test_a_missing_reason_is_refused_as_missing_not_as_a_python_none() -> None:
    with pytest.raises(InvalidInput) as refused:
        required_text("reason", None, 500, required_to="engage the brake (say why updates stop)")

    assert refused.value.fields == {"field": "reason", "value": None}
    assert refused.value.message == (
        "reason: missing; it is required to engage the brake (say why updates stop)"
    )


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("", id="empty"),
        pytest.param("  \t\n", id="blank"),
    ],
)
def test_a_missing_or_blank_reason_is_refused_naming_what_it_is_for(value: object) -> None:
    with pytest.raises(InvalidInput) as refused:
        required_text("reason", value, 500, required_to="halt a release (say why)")

    assert refused.value.fields == {"field": "reason", "value": value}
    assert refused.value.message == f"reason: {value!r} is required to halt a release (say why)"


def test_a_reason_is_kept_as_typed() -> None:
    assert required_text("reason", " disk full ", 500, required_to="roll back") == " disk full "


def test_a_reason_longer_than_its_limit_is_refused_as_any_stored_text() -> None:
    with pytest.raises(InvalidInput, match="is longer than 5 characters"):
        required_text("reason", "x" * 6, 5, required_to="roll back")
