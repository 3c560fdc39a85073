"""The agent's options in seconds (`update-now --timeout-seconds`, `self-update switch
--deadline-seconds`, `enroll --request-timeout-seconds` and `--health-deadline-seconds`) read a
number as the product reads every number from text: ASCII digits, here with one decimal point —
never the other forms Python's `float` takes (another script's digits, a `_`, surrounding spaces,
an exponent, `nan`)."""

from __future__ import annotations

import pytest

from agent_daemon.commands.cli import _parser, main

ENROLL = ["enroll", "--url", "https://control.example", "--credential", "nwa_x"]
OPTIONS = [
    pytest.param(["update-now", "--timeout-seconds"], "timeout_seconds", id="update_now"),
    pytest.param(
        ["self-update", "switch", "9.9.9", "--deadline-seconds"], "deadline_seconds", id="switch"
    ),
    pytest.param(
        [*ENROLL, "--request-timeout-seconds"], "request_timeout_seconds", id="request_timeout"
    ),
    pytest.param(
        [*ENROLL, "--health-deadline-seconds"], "health_deadline_seconds", id="health_deadline"
    ),
]


@pytest.mark.parametrize(("command", "name"), OPTIONS)
@pytest.mark.parametrize(("text", "seconds"), [("1800", 1800.0), ("2.5", 2.5), ("0.1", 0.1)])
def test_ascii_digits_with_a_decimal_point_are_seconds(
    command: list[str], name: str, text: str, seconds: float
) -> None:
    assert getattr(_parser().parse_args([*command, text]), name) == seconds


@pytest.mark.parametrize(("command", "name"), OPTIONS)
@pytest.mark.parametrize(
    "text",
    [
        pytest.param("\u0663", id="arabic_indic_digit"),
        pytest.param("\uff15", id="fullwidth_digit"),
        pytest.param("1_0", id="underscore"),
        pytest.param(" 5 ", id="spaces"),
        pytest.param("5\n", id="newline"),
        pytest.param("1e3", id="exponent"),
        pytest.param("+5", id="plus"),
        pytest.param("5.", id="point_without_decimals"),
        pytest.param(".5", id="point_without_a_whole"),
        pytest.param("1.2.3", id="two_points"),
        pytest.param("nan", id="nan"),
        pytest.param("inf", id="inf"),
        pytest.param("-1", id="negative"),
        pytest.param("0", id="zero"),
        pytest.param("0.0", id="zero_with_decimals"),
        pytest.param("", id="empty"),
        pytest.param("9" * 40, id="forty_digits"),
    ],
)
def test_anything_else_is_refused_naming_the_option_and_the_value(
    command: list[str], name: str, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    option = command[-1]
    # Refused while the command line is read, so a regression fails here before the command
    # runs: `self-update switch` would act on this host's real install root, `enroll` would go
    # out to the network.
    with pytest.raises(Exception, match=f"{option}: found"):
        _parser().parse_args([*command, text])
    assert main([*command, text]) == 2
    out, err = capsys.readouterr()
    assert f"{option}: found {text!r} — expected a number of seconds above 0" in err, err
    assert "ASCII digits" in err
    assert "Traceback" not in err
    assert out == ""
