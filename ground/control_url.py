"""The address an agent reaches its control plane at: the agent's `--url` and `control_url`, and
the address the control plane prints in a host's install line. One rule, so that the line an
operator is given is never one the agent then refuses.

An http(s) URL with a host, a port from 1 to 65535 if one is named, no space or control
character, no user or password (the agent's credential is its own; a password here would be
written to the config and shown by every command that names the control plane), no query or
fragment. Whether plain http is allowed is the agent's own setting (`insecure_http`).
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["check_control_url", "password_hidden"]


def check_control_url(value: str) -> str:
    """`value` without a trailing `/`; ValueError saying what was expected otherwise."""
    expected = "expected an http(s) URL such as https://control.example"
    if not value.isprintable() or any(character.isspace() for character in value):
        raise ValueError(f"{expected} (no space or control character)")
    try:
        parts = urlsplit(value)
    except ValueError as exc:  # a broken [IPv6] host
        raise ValueError(f"{expected} ({exc})") from exc
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValueError(expected)
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"expected a port from 1 to 65535 ({exc})") from exc
    if port == 0:
        raise ValueError("expected a port from 1 to 65535")
    if parts.username is not None or parts.password is not None:
        raise ValueError("expected no user or password in it (https://control.example)")
    if parts.query or parts.fragment:
        raise ValueError("expected a base URL without ?query or #fragment")
    return value.rstrip("/")


def password_hidden(value: str) -> str:
    """`value` to quote in a refusal: a password in it shown as `***`."""
    scheme, slashes, rest = value.partition("://")
    if not slashes:
        return value
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    login, at, host = rest[:end].rpartition("@")
    if not at or ":" not in login:
        return value
    return f"{scheme}://{login.split(':', 1)[0]}:***@{host}{rest[end:]}"
