"""The agent's failures, one base class per kind.

    AgentError
     +-- ConfigError             the agent's own config file is missing, unsafe or invalid
     +-- DaemonStateError        a state file cannot be read (corrupt, or written by newer code)
     +-- DaemonAlreadyRunning    another daemon holds the state directory
     +-- ControlPlaneError       talking to the control plane
          +-- ControlPlaneUnreachable   no answer, a timeout or a 5xx: the agent is offline
          +-- CredentialRefused         401/403: the agent's credential is not accepted
          +-- EnrollmentRefused         an enrollment token was not exchanged (its code's line)
          +-- BadServerAnswer           an answer the agent cannot understand
     +-- SelfUpdateError         a build of the updater itself was not installed or switched to
     +-- UpdateError             one update was not applied; the running version keeps running
          +-- ReleaseRefused            verification refused the release: it is never installed
          |    +-- MalformedRelease          the manifest bytes are not a valid manifest
          |    +-- UnknownSigningKey         signed by a key that is not trusted
          |    +-- ExpiredTrustRoot          the held trust root has expired: nothing is accepted
          |    +-- UnusableTrustRoot         the held trust root's file cannot be read
          |    +-- BadReleaseSignature       the signature does not match the manifest bytes
          |    +-- WrongPlatform / WrongChannel   built for another platform or channel
          |    +-- WrongProduct                   the updater's build offered as the agent's, or
          |                                       the other way round
          |    +-- ManifestExpired           past its `expires`
          |    +-- ManifestRollback          `manifest_version` at or below the stored floor
          |    +-- VersionDowngrade          an older agent than installed, not allowed
          |    +-- ClockBehind               the clock is earlier than the running build's date
          |    +-- IssuedInFuture            `issued_at` beyond the allowed skew ahead of now
          |    +-- VersionMarkedBad          this version failed its health check before
          |    +-- ArtifactMismatch          the download is not the signed artifact
          +-- UntrustedArtifactSource   the artifact URL is malformed or on an origin not allowed
          +-- DownloadFailed            the artifact could not be fetched (a `.part` may resume)
          |    +-- DownloadTooLong           the server sent, or announced, more than `length`
          |    +-- DownloadStalled           read timeout or overall deadline
          |    +-- NotEnoughDisk             free space below artifact + unpacked size + reserve
          |    +-- DownloadRefused           the server refused it with a code (403 token_revoked,
          |    |                             token_expired): final, the code kept as the reason
          |    +-- DownloadUnavailable       no connection, or a 5xx: the platform is unavailable
          +-- InstallFailed             the build could not be placed into versions/<v>/
          |    +-- UnsafeArchive             absolute path, `..`, a link leaving the folder, …
          |    +-- SelfTestFailed            `<build> --version` did not print the version
          +-- HealthCheckFailed         the restarted agent did not report the version in time
          +-- UpdateInProgress          another process holds the update lock

Foreign exceptions (httpx, OSError, pydantic) are converted where they happen, with
`raise ... from`.
Messages say what was expected, what was found, and which field or file.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

__all__ = [
    "AgentError",
    "ArtifactMismatch",
    "BadReleaseSignature",
    "BadServerAnswer",
    "ClockBehind",
    "ConfigError",
    "ControlPlaneError",
    "ControlPlaneUnreachable",
    "CredentialRefused",
    "DaemonAlreadyRunning",
    "DaemonStateError",
    "DownloadFailed",
    "DownloadRefused",
    "DownloadStalled",
    "DownloadTooLong",
    "DownloadUnavailable",
    "EnrollmentRefused",
    "ExpiredTrustRoot",
    "HealthCheckFailed",
    "InstallFailed",
    "IssuedInFuture",
    "MalformedRelease",
    "ManifestExpired",
    "ManifestRollback",
    "NotEnoughDisk",
    "ReleaseRefused",
    "SelfTestFailed",
    "SelfUpdateError",
    "UnknownSigningKey",
    "UnsafeArchive",
    "UntrustedArtifactSource",
    "UnusableTrustRoot",
    "UpdateError",
    "UpdateInProgress",
    "VersionDowngrade",
    "VersionMarkedBad",
    "WrongChannel",
    "WrongPlatform",
    "WrongProduct",
    "describe_validation_error",
]


class AgentError(Exception):
    """Base of every failure the agent reports in its own words."""


class ConfigError(AgentError, ValueError):
    """The agent's config file is missing, unsafe (readable by others) or has a bad field."""


class DaemonStateError(AgentError):
    """A state file cannot be used: corrupt, or written by a newer version of the agent."""


class DaemonAlreadyRunning(AgentError):
    """Another daemon holds the state directory's lock: one daemon per state directory. Not a
    configuration error: once that daemon stops, this one can start."""


class ControlPlaneError(AgentError):
    """Talking to the control plane failed."""


class ControlPlaneUnreachable(ControlPlaneError):
    """No usable answer (connection refused, timeout, 5xx): the agent is offline this minute.
    `status` is the 5xx the control plane answered in the contract's words (it is unavailable:
    its database down), None when nothing answered, or something on the way did."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class CredentialRefused(ControlPlaneError):
    """The control plane refused the agent's credential (401 or 403); `answered` is its answer in
    words (`401 credential_revoked: …`)."""

    def __init__(self, message: str, *, answered: str = "") -> None:
        super().__init__(message)
        self.answered = answered


class EnrollmentRefused(ControlPlaneError):
    """The control plane refused to exchange an enrollment token for an agent: unknown or
    revoked, expired, used up, or the name asked for is not allowed or taken."""


class BadServerAnswer(ControlPlaneError):
    """The control plane answered something the agent cannot understand."""


class SelfUpdateError(AgentError):
    """A build of the updater itself was not installed or switched to; the running one stays."""


class UpdateError(AgentError):
    """One update was not applied. In every case the version that ran before keeps running."""


class ReleaseRefused(UpdateError):
    """Verification refused the release: an update that cannot be verified is not installed."""


class MalformedRelease(ReleaseRefused):
    """The manifest bytes are not a valid manifest (bad JSON, duplicate keys, a bad field)."""


class UnknownSigningKey(ReleaseRefused):
    """The release is signed by a key that is not among the pinned, trusted keys."""


class ExpiredTrustRoot(ReleaseRefused):
    """The trust root this host holds has expired: it vouches for no release key until the
    operators publish its successor and the daemon fetches it."""


class UnusableTrustRoot(ReleaseRefused):
    """The held trust root's file cannot be read or is not a root: no key can be trusted."""


class BadReleaseSignature(ReleaseRefused):
    """The signature is malformed or does not match the exact manifest bytes."""


class WrongPlatform(ReleaseRefused):
    """The release is built for another platform than this host's."""


class WrongChannel(ReleaseRefused):
    """The release belongs to another channel than the one this agent follows."""


class WrongProduct(ReleaseRefused):
    """The release is a build of the other program: the managed agent's offered to install as
    nachtwacht's own agent, or the other way round."""


class ManifestExpired(ReleaseRefused):
    """The manifest's `expires` is in the past: an old, possibly vulnerable release replayed."""


class ManifestRollback(ReleaseRefused):
    """`manifest_version` is at or below the highest one this host already accepted."""


class VersionDowngrade(ReleaseRefused):
    """The release is older than the installed agent and does not say a downgrade is allowed."""


class ClockBehind(ReleaseRefused):
    """The clock reads earlier than the running build was signed: it is wrong, so expiry checks
    cannot be trusted."""


class IssuedInFuture(ReleaseRefused):
    """`issued_at` lies further ahead of the clock than the allowed skew: a signer with a wrong
    clock. Accepted, it would become the running build's date that every correctly dated release
    is refused against (`ClockBehind`) for as long as that date is ahead."""


class VersionMarkedBad(ReleaseRefused):
    """This version failed its self-test or health check on this host before; it is not retried."""


class ArtifactMismatch(ReleaseRefused):
    """The downloaded bytes are not the signed artifact (tampered, or another release's)."""


class UntrustedArtifactSource(UpdateError):
    """The artifact URL does not parse, is not absolute http(s), or names an origin that is
    neither the control plane's nor one the operator allowed (`artifact_origins`)."""


class DownloadFailed(UpdateError):
    """The artifact could not be fetched; an interrupted download leaves a resumable `.part`."""


class DownloadTooLong(DownloadFailed):
    """The server sent, or announced, more bytes than the manifest's `length`."""


class DownloadStalled(DownloadFailed):
    """No byte within the read timeout, or the whole download ran past its deadline."""


class NotEnoughDisk(DownloadFailed):
    """Free space is below artifact length + unpacked size + the configured reserve."""


class DownloadRefused(DownloadFailed):
    """The artifact's server refused the download with a 4xx; `code` is the contract's code of the
    answer when it named one (`token_revoked`, `token_expired`), so the outcome can keep it."""

    def __init__(self, message: str, *, status: int, code: str | None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class DownloadUnavailable(DownloadFailed):
    """The artifact's server could not be reached or answered 5xx: the platform is unavailable,
    the partial download is kept, and the run is tried again while its window is open."""


class InstallFailed(UpdateError):
    """The build could not be placed into `versions/<v>/`."""


class UnsafeArchive(InstallFailed):
    """The archive holds an absolute path, a `..` component, a link leaving the folder, a device
    file, or more bytes than the signed `unpacked_size`."""


class SelfTestFailed(InstallFailed):
    """`<build>/bin/provibr-agent --version` failed or printed another version."""


class HealthCheckFailed(UpdateError):
    """The restarted agent did not report the expected version within the deadline."""


class UpdateInProgress(UpdateError):
    """Another process holds the update lock: one update at a time."""


def describe_validation_error(exc: ValidationError, source: str | None) -> str:
    """One line per problem: `source: field: found 'x' — expected …` (without `source: ` when
    there is no file or endpoint to name)."""
    lines = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"]) or "(document)"
        if source is not None:
            field = f"{source}: {field}"
        if error["type"] == "missing":
            lines.append(f"{field}: missing (required)")
            continue
        if error["type"] == "extra_forbidden":
            lines.append(f"{field}: unknown field (check the spelling)")
            continue
        found = error.get("input")
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["loc"] and error["loc"][-1] in _SECRET_FIELDS:
            lines.append(f"{field}: the value given (not shown) — {message}")
            continue
        lines.append(f"{field}: found {_shown(found)} — {message}")
    return "\n".join(lines)


def _shown(value: Any) -> str:
    # A URL's password (a proxy's, one typed into a control URL) is never quoted back.
    text = _URL_PASSWORD.sub(r"\1***@", repr(value))
    return text if len(text) <= 80 else text[:77] + "..."


# Fields whose value is a secret: a refusal names the field, never the value.
_SECRET_FIELDS = frozenset({"credential"})
# `scheme://user:password@`: the password, up to the `@` that ends it.
_URL_PASSWORD = re.compile(r"(://[^/@:\s]*:)[^/@\s]*@")
