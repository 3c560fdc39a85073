"""A refusal naming the run's token has one outcome reason, whichever call it answered: the
swap's confirmation and the download read it from the same table (`wire.token_refusal_reason`)."""

from __future__ import annotations

import pytest

from agent_daemon.connection.wire import swap_refusal_reason, token_refusal_reason
from agent_daemon.errors import DownloadRefused
from agent_daemon.updater.failure_reasons import failure_reason
from ground.contract import AnswerCode, ErrorDetail, OutcomeReason, RefusalCode

ALL_CODES = sorted({code.value for code in AnswerCode} | {code.value for code in RefusalCode})


def test_the_tokens_refusals_are_kept_as_their_reasons() -> None:
    reasons = {code: token_refusal_reason(code) for code in ALL_CODES}
    assert {code: reason for code, reason in reasons.items() if reason is not None} == {
        "token_revoked": OutcomeReason.TOKEN_REVOKED,
        "token_expired": OutcomeReason.TOKEN_EXPIRED,
    }
    assert token_refusal_reason(None) is None


@pytest.mark.parametrize("code", ALL_CODES)
def test_the_confirmation_and_the_download_read_a_tokens_refusal_alike(code: str) -> None:
    reason = token_refusal_reason(code)
    if reason is None:
        return
    confirmed = swap_refusal_reason(ErrorDetail(code=code, message="refused"))
    downloaded, may_pass = failure_reason(DownloadRefused("403", status=403, code=code))
    assert confirmed == downloaded == reason
    assert may_pass is False
