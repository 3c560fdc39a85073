"""The rules of a token without a database: its terms' bounds and the verdict on a use."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from control_plane.enrollment.rules import (
    MAX_USES,
    TokenState,
    TokenTerms,
    Verdict,
    install_command,
    parse_duration,
    trust_file,
    verdict,
)
from control_plane.errors import InvalidInput

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)


def _token(**changes: object) -> TokenState:
    fields: dict[str, object] = {
        "uses": 0,
        "uses_allowed": 1,
        "expires_at": NOW + timedelta(hours=1),
        "revoked_at": None,
        "name_pattern": None,
    }
    fields.update(changes)
    return TokenState(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("token", "name", "expected"),
    [
        pytest.param(_token(), "web-01", Verdict.ALLOWED, id="fresh"),
        pytest.param(_token(revoked_at=NOW), "web-01", Verdict.REVOKED, id="revoked"),
        pytest.param(
            _token(revoked_at=NOW, uses=1, expires_at=NOW),
            "web-01",
            Verdict.REVOKED,
            id="revoked_tells_nothing_more",
        ),
        pytest.param(_token(expires_at=NOW), "web-01", Verdict.EXPIRED, id="expires_now"),
        pytest.param(
            _token(expires_at=NOW + timedelta(microseconds=1)),
            "web-01",
            Verdict.ALLOWED,
            id="just_before_expiry",
        ),
        pytest.param(_token(uses=1), "web-01", Verdict.USED_UP, id="used_up"),
        pytest.param(_token(uses=4, uses_allowed=5), "web-01", Verdict.ALLOWED, id="one_left"),
        pytest.param(_token(name_pattern="web-*"), "web-01", Verdict.ALLOWED, id="matches"),
        pytest.param(
            _token(name_pattern="web-*"), "db-01", Verdict.NAME_NOT_ALLOWED, id="other_name"
        ),
        pytest.param(
            _token(name_pattern="web-*"), "WEB-01", Verdict.NAME_NOT_ALLOWED, id="case_sensitive"
        ),
        pytest.param(
            _token(name_pattern="web-??"), "web-011", Verdict.NAME_NOT_ALLOWED, id="whole_name"
        ),
    ],
)
def test_the_verdict_on_a_use(token: TokenState, name: str, expected: Verdict) -> None:
    assert verdict(token, name, NOW) is expected


@pytest.mark.parametrize(
    ("terms", "field"),
    [
        pytest.param({"uses": 0}, "uses", id="no_use"),
        pytest.param({"uses": MAX_USES + 1}, "uses", id="too_many_uses"),
        pytest.param({"uses": True}, "uses", id="a_bool_is_not_a_count"),
        pytest.param({"expires_in": timedelta(seconds=59)}, "expires_in", id="under_a_minute"),
        pytest.param({"expires_in": timedelta(days=30, seconds=1)}, "expires_in", id="over_30d"),
        pytest.param({"name_pattern": "  "}, "name_pattern", id="blank_pattern"),
        pytest.param({"name_pattern": "web\x7f*"}, "name_pattern", id="control_in_pattern"),
        pytest.param({"label": "x" * 201}, "label", id="long_label"),
        pytest.param({"label": "a\x00b"}, "label", id="nul_in_label"),
    ],
)
def test_terms_out_of_bounds_are_refused_naming_the_field(
    terms: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        TokenTerms(**terms)  # type: ignore[arg-type]
    assert refused.value.fields["field"] == field
    assert refused.value.message.startswith(f"{field}: ")


def test_the_defaults_are_one_use_for_a_day() -> None:
    terms = TokenTerms()
    assert (terms.uses, terms.expires_in) == (1, timedelta(hours=24))
    assert TokenTerms(label="  web  ").label == "web"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("30m", timedelta(minutes=30), id="minutes"),
        pytest.param("24h", timedelta(hours=24), id="hours"),
        pytest.param("7d", timedelta(days=7), id="days"),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration("--expires-in", text) == expected


@pytest.mark.parametrize("text", ["", "24", "h", "1.5h", "-1h", "24 hours", "1w"])
def test_a_duration_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(InvalidInput, match=r"--expires-in: .* is not a duration"):
        parse_duration("--expires-in", text)


def test_the_install_line_quotes_the_address() -> None:
    assert install_command("https://cp.example/a b", "nwe_x", None).startswith(
        "nachtwacht agent install --url 'https://cp.example/a b' --enrollment-token nwe_x "
    )


def test_the_install_line_trusts_the_newest_published_root_by_its_file_name() -> None:
    # `agent install` refuses to run without a trust option: the line names one.
    assert install_command("https://cp.example", "nwe_x", 3) == (
        "nachtwacht agent install --url https://cp.example --enrollment-token nwe_x"
        " --trust-root root-3.json"
    )
    assert trust_file(3) == "root-3.json"


def test_with_no_root_published_the_install_line_trusts_the_release_key() -> None:
    assert install_command("https://cp.example", "nwe_x", None) == (
        "nachtwacht agent install --url https://cp.example --enrollment-token nwe_x"
        " --trusted-key release.pub"
    )
    assert trust_file(None) == "release.pub"
