"""Why an update failed, as a reason and in words: pure functions of the exception.

`failure_reason` maps the updater's exceptions (and an `OSError`) to the contract's
`OutcomeReason` and says whether the failure may pass within the window (the platform
unavailable, a cut or stalled download, a full disk, an interruption); `describe` words an
exception for an outcome's error, and `clip` keeps that error short enough for a report.
"""

from __future__ import annotations

import errno

from agent_daemon.connection.wire import token_refusal_reason
from agent_daemon.errors import (
    DownloadFailed,
    DownloadRefused,
    DownloadTooLong,
    DownloadUnavailable,
    HealthCheckFailed,
    InstallFailed,
    NotEnoughDisk,
    ReleaseRefused,
    SelfUpdateError,
    UntrustedArtifactSource,
    UpdateError,
    UpdateInProgress,
)
from ground.contract import OutcomeReason
from ground.contract.plain_text import clipped

__all__ = ["MAX_ERROR_CHARACTERS", "clip", "describe", "failure_reason"]

# An outcome's error travels in a report whose field holds at most 2,000 characters
# (ground.contract.MAX_MESSAGE_LENGTH); messages quoting hostile input are cut well before.
MAX_ERROR_CHARACTERS = 1000

_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})

# What each of the updater's failures means for the run: its reason, and whether it may pass
# within the window. The first match wins, so a subclass stands before its base (each download
# failure before DownloadFailed).
_FAILURES: tuple[tuple[type[BaseException], OutcomeReason, bool], ...] = (
    (DownloadUnavailable, OutcomeReason.PLATFORM_UNAVAILABLE, True),
    (NotEnoughDisk, OutcomeReason.DISK_FULL, True),
    (DownloadTooLong, OutcomeReason.DOWNLOAD_FAILED, False),
    (DownloadFailed, OutcomeReason.DOWNLOAD_FAILED, True),
    (ReleaseRefused, OutcomeReason.VERIFICATION_FAILED, False),
    (UntrustedArtifactSource, OutcomeReason.VERIFICATION_FAILED, False),
    (InstallFailed, OutcomeReason.INSTALL_FAILED, False),
    (SelfUpdateError, OutcomeReason.INSTALL_FAILED, False),
    (HealthCheckFailed, OutcomeReason.HEALTH_CHECK_FAILED, False),
    (UpdateInProgress, OutcomeReason.INTERRUPTED, True),
)


def failure_reason(exc: BaseException) -> tuple[OutcomeReason | None, bool]:
    """Why an update failed (`OutcomeReason`), and whether it may pass within the window:
    the platform unavailable, a cut or stalled download, a full disk, an interruption."""
    if isinstance(exc, DownloadRefused):
        return token_refusal_reason(exc.code) or OutcomeReason.DOWNLOAD_FAILED, False
    for kind, reason, may_pass in _FAILURES:
        if isinstance(exc, kind):
            return reason, may_pass
    if isinstance(exc, OSError):
        if exc.errno in _DISK_FULL_ERRNOS:
            return OutcomeReason.DISK_FULL, True
        return OutcomeReason.INTERRUPTED, True
    return None, False


def clip(text: str) -> str:
    return clipped(text, MAX_ERROR_CHARACTERS)


def describe(exc: BaseException) -> str:
    if isinstance(exc, UpdateError):
        return str(exc)
    if isinstance(exc, OSError):
        return f"{exc.filename or 'install'}: {exc.strerror or exc}"
    return f"{type(exc).__name__}: {exc}"
