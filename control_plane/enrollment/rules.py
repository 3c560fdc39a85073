"""The rules of an enrollment token, without I/O: its bounds, its terms checked when it is made,
and whether a use of it at `now` for an agent name is allowed.

A token's secret is `nwe_` and 256 random bits (like every credential), stored only as its
sha256. Guessing one is hopeless, so the exchange needs no rate limit: what protects it is the
size of the secret, its short life and its few uses.
"""

from __future__ import annotations

import enum
import re
import secrets
import shlex
from dataclasses import dataclass
from datetime import datetime, timedelta
from fnmatch import fnmatchcase

from control_plane.errors import InvalidInput
from control_plane.inputs import plain_label
from ground.contract import ENROLLMENT_TOKEN_PREFIX, AnswerCode
from ground.contract.messages import MAX_AGENT_NAME_LENGTH

__all__ = [
    "DEFAULT_EXPIRES_IN",
    "DEFAULT_USES",
    "EXPIRES_IN_BOUNDS",
    "MAX_EXPIRES_IN",
    "MAX_LABEL_LENGTH",
    "MAX_PATTERN_LENGTH",
    "MAX_USES",
    "MIN_EXPIRES_IN",
    "TOKEN_PREFIX",
    "TokenState",
    "TokenTerms",
    "Verdict",
    "install_command",
    "new_token_secret",
    "parse_duration",
    "token_refusal",
    "trust_file",
    "verdict",
]

TOKEN_PREFIX = ENROLLMENT_TOKEN_PREFIX
DEFAULT_USES = 1
MAX_USES = 10_000
DEFAULT_EXPIRES_IN = timedelta(hours=24)
# Long enough to reach a host by hand; short enough that a token left in a ticket dies soon.
MIN_EXPIRES_IN = timedelta(minutes=1)
MAX_EXPIRES_IN = timedelta(days=30)
# What a refused lifetime is told it should be.
EXPIRES_IN_BOUNDS = (
    f"is outside {MIN_EXPIRES_IN.seconds // 60} minute to {MAX_EXPIRES_IN.days} days"
)
MAX_LABEL_LENGTH = 200
MAX_PATTERN_LENGTH = MAX_AGENT_NAME_LENGTH

_DURATION = re.compile(r"(?P<count>[0-9]{1,6})(?P<unit>[mhd])")
_UNITS = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1)}


def new_token_secret() -> str:
    """A fresh token: the prefix and 256 random bits."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def trust_file(newest_root: int | None) -> str:
    """The file the host's install line trusts: the newest published trust root as
    `root-init`/`root-next` name it (`root-3.json`), or the release key when none is published.
    It comes from the provider out of band, never from the control plane: a control plane must
    not be able to hand a host the keys it trusts."""
    return "release.pub" if newest_root is None else f"root-{newest_root}.json"


def install_command(url: str, secret: str, newest_root: int | None) -> str:
    """The one line an admin runs on the host: install the agent against `url` with the token,
    trusting the newest published root (`--trust-root root-N.json`) or, with none published,
    the release key (`--trusted-key release.pub`)."""
    option = "--trusted-key" if newest_root is None else "--trust-root"
    return (
        f"nachtwacht agent install --url {shlex.quote(url)} --enrollment-token {secret}"
        f" {option} {trust_file(newest_root)}"
    )


def parse_duration(field: str, text: str) -> timedelta:
    """`30m`, `24h` or `7d` as a duration; anything else is refused naming `field`."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise InvalidInput(field, text, "is not a duration (a whole number and m, h or d: 24h)")
    return int(match["count"]) * _UNITS[match["unit"]]


@dataclass(frozen=True, kw_only=True)
class TokenTerms:
    """What a new token allows, checked when it is built: each bound refused naming the field,
    the value and what was expected."""

    uses: int = DEFAULT_USES
    expires_in: timedelta = DEFAULT_EXPIRES_IN
    name_pattern: str | None = None
    label: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.uses, bool) or not isinstance(self.uses, int):
            raise InvalidInput("uses", self.uses, "is not a whole number")
        if not 1 <= self.uses <= MAX_USES:
            raise InvalidInput("uses", self.uses, f"is outside 1 to {MAX_USES}")
        if not MIN_EXPIRES_IN <= self.expires_in <= MAX_EXPIRES_IN:
            minutes = self.expires_in.total_seconds() / 60
            raise InvalidInput(
                "expires_in",
                f"{minutes:g} minutes",
                EXPIRES_IN_BOUNDS,
            )
        object.__setattr__(
            self, "name_pattern", plain_label("name_pattern", self.name_pattern, MAX_PATTERN_LENGTH)
        )
        object.__setattr__(self, "label", plain_label("label", self.label, MAX_LABEL_LENGTH))


@dataclass(frozen=True, kw_only=True)
class TokenState:
    """A stored token as a use judges it."""

    uses: int
    uses_allowed: int
    expires_at: datetime
    revoked_at: datetime | None
    name_pattern: str | None


class Verdict(enum.Enum):
    """Whether a use is allowed; every refusal is the contract's code for the host's admin."""

    ALLOWED = None
    REVOKED = AnswerCode.ENROLLMENT_TOKEN_REFUSED
    EXPIRED = AnswerCode.ENROLLMENT_TOKEN_EXPIRED
    USED_UP = AnswerCode.ENROLLMENT_TOKEN_USED_UP
    NAME_NOT_ALLOWED = AnswerCode.AGENT_NAME_NOT_ALLOWED


def token_refusal(token: TokenState, now: datetime) -> Verdict | None:
    """Why `token` cannot be used at `now`, whatever the name: revoked first (a revoked token
    tells nothing more), then expired, used up; None when it can."""
    if token.revoked_at is not None:
        return Verdict.REVOKED
    if now >= token.expires_at:
        return Verdict.EXPIRED
    if token.uses >= token.uses_allowed:
        return Verdict.USED_UP
    return None


def verdict(token: TokenState, name: str, now: datetime) -> Verdict:
    """A use of `token` at `now` for an agent called `name`: `token_refusal`, then the name
    against the pattern."""
    refused = token_refusal(token, now)
    if refused is not None:
        return refused
    if token.name_pattern is not None and not fnmatchcase(name, token.name_pattern):
        return Verdict.NAME_NOT_ALLOWED
    return Verdict.ALLOWED
