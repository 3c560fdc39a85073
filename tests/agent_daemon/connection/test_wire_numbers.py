"""The control plane's answers are untrusted input: `NaN`, `Infinity` and a literal beyond a
float's range are not JSON, and an answer that holds one is a bad answer (consuming nothing),
never a value the agent goes on to plan, sleep or compare with."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_daemon.connection.wire import error_detail, read_json
from agent_daemon.errors import BadServerAnswer
from tests.agent_daemon.minute.slot_world import make

NON_FINITE = [
    pytest.param("NaN", id="nan"),
    pytest.param("Infinity", id="infinity"),
    pytest.param("-Infinity", id="minus_infinity"),
    pytest.param("1e400", id="overflows"),
    pytest.param("-" + "9" * 400 + ".0", id="overflows_by_digits"),
]


@pytest.mark.parametrize("token", NON_FINITE)
def test_an_answer_with_a_non_finite_number_is_not_json(token: str) -> None:
    with pytest.raises(BadServerAnswer, match=r"^GET config: the answer is not JSON \(") as bad:
        read_json(f'{{"retry_after_seconds": {token}}}'.encode(), source="GET config")
    assert len(str(bad.value)) < 300


@pytest.mark.parametrize("token", NON_FINITE)
def test_an_error_answer_with_a_non_finite_number_is_no_detail(token: str) -> None:
    body = f'{{"detail": {{"code": "cap_full", "message": "x", "retry_after_seconds": {token}}}}}'
    assert error_detail(body.encode()) is None


def test_finite_numbers_are_read_as_before() -> None:
    document = read_json(
        b'{"a": 1.5, "b": 1e-400, "c": 1.7976931348623157e308, "d": 7}', source="x"
    )
    assert document == {"a": 1.5, "b": 0.0, "c": 1.7976931348623157e308, "d": 7}


@pytest.mark.parametrize("token", NON_FINITE)
def test_a_config_with_a_non_finite_number_consumes_nothing(tmp_path: Path, token: str) -> None:
    h, _ = make(tmp_path)
    h.control_plane.config_body = (
        b'{"agent_id": "4b1c9a6e-0000-4000-8000-000000000001", '
        b'"schedule": {"enabled": true, "times": ["03:00"]}, '
        b'"timezone": "Europe/Amsterdam", "catch_up_minutes": ' + token.encode() + b", "
        b'"brake": {"engaged": false}}'
    )
    assert h.daemon.tick() == "bad_config"
    assert h.state().last_consumed is None
