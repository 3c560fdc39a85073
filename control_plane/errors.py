"""The control plane's failures, one base class per kind.

    ControlPlaneError
    ├── ConfigurationError      bad flags, environment or stored settings (CLI: exit 2)
    ├── DatabaseUnavailable     the database cannot be started, reached or migrated
    └── RequestRefused          an HTTP request that is answered with an error status
        ├── Unauthenticated     401: no credential, or one nobody issued
        ├── Forbidden           403: a credential for another audience
        ├── NotFound            404: no such object *for this caller* (other organisations' too)
        ├── InvalidInput        422: a value that breaks a rule; names the field and the value
        ├── Conflict            409: the request contradicts the stored state
        └── ClaimRefused        a refused claim: a contract `RefusalCode`, which fixes the status

Foreign exceptions (psycopg, alembic, pgserver) are converted where they are caught, with
`raise ... from exc`, so a user sees one clear line and never a stack trace.
"""

from __future__ import annotations

from typing import Any

from ground.contract import RefusalCode

__all__ = [
    "ClaimRefused",
    "ConfigurationError",
    "Conflict",
    "ControlPlaneError",
    "DatabaseUnavailable",
    "Forbidden",
    "InvalidInput",
    "NotFound",
    "RequestRefused",
    "Unauthenticated",
    "quoted",
]


class ControlPlaneError(Exception):
    """Base of every failure the control plane reports."""


class ConfigurationError(ControlPlaneError):
    """A flag, environment variable or setting cannot be used."""


class DatabaseUnavailable(ControlPlaneError):
    """The database cannot be started, reached or migrated."""


class RequestRefused(ControlPlaneError):
    """A request answered with `status` and the JSON body `{"detail": detail}`."""

    status = 400

    def __init__(self, message: str, *, code: str | None = None, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.fields = fields

    @property
    def detail(self) -> Any:
        if self.code is None and not self.fields:
            return self.message
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        body.update(self.fields)
        return body


class Unauthenticated(RequestRefused):
    status = 401


class Forbidden(RequestRefused):
    status = 403


class NotFound(RequestRefused):
    status = 404


# A message quotes the value it refuses up to this many characters (the answer's `value` field is
# shortened by the exception handler, `control_plane.api.answers.shown_value`).
MAX_QUOTED = 100


def quoted(value: Any) -> str:
    """`repr(value)`, shortened: a refusal never echoes an unbounded value."""
    text = repr(value)
    return text if len(text) <= MAX_QUOTED else f"{text[: MAX_QUOTED - 1]}…"


class InvalidInput(RequestRefused):
    """A value that breaks a rule. The message names the field, the value and what was expected."""

    status = 422

    def __init__(
        self,
        field: str,
        value: Any,
        expected: str,
        *,
        code: str = "invalid_input",
        message: str | None = None,
    ) -> None:
        super().__init__(
            message if message is not None else f"{field}: {quoted(value)} {expected}",
            code=code,
            field=field,
            value=value,
        )


class Conflict(RequestRefused):
    status = 409


class ClaimRefused(RequestRefused):
    """A refused claim. The contract's `refusal` decides the status and whether the slot is
    consumed; nothing here re-derives either."""

    def __init__(self, refusal: RefusalCode, message: str, **fields: Any) -> None:
        super().__init__(message, code=refusal.value, **fields)
        self.refusal = refusal
        self.status = refusal.status
