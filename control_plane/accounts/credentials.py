"""Bearer credentials for the three audiences.

A secret is shown once, when it is issued, and stored only as its sha256. The prefix names the
audience so a person can tell which key is which; authority comes from the stored row alone.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from enum import StrEnum

from ground.contract import AGENT_CREDENTIAL_PREFIX

__all__ = ["PREFIXES", "Audience", "new_secret", "secret_sha256", "secrets_match"]


class Audience(StrEnum):
    AGENT = "agent"
    PANEL = "panel"
    OPERATOR = "operator"


PREFIXES = {
    Audience.AGENT: AGENT_CREDENTIAL_PREFIX,
    Audience.PANEL: "nwp_",
    Audience.OPERATOR: "nwo_",
}


def new_secret(audience: Audience) -> str:
    """A fresh high-entropy secret (256 bits) carrying its audience's prefix."""
    return PREFIXES[audience] + secrets.token_urlsafe(32)


def secret_sha256(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def secrets_match(stored_sha256: str, presented_sha256: str) -> bool:
    return hmac.compare_digest(stored_sha256, presented_sha256)
