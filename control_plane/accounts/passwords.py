"""People's passwords (scrypt, from the standard library) and their second factor, TOTP.

A password is stored as `scrypt$N$r$p$salt$hash` (base64), so its cost can be raised later
without losing the passwords stored before. TOTP is RFC 6238 with its defaults (HMAC-SHA1, six
digits, thirty-second steps), what every authenticator app speaks: written out here in a few
lines with `hmac` rather than taken from a library. A code is accepted one step either side of
the server's (a phone's clock drifts), and the caller refuses a step it accepted before.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import struct
from datetime import datetime
from urllib.parse import quote, urlencode

__all__ = [
    "MIN_PASSWORD",
    "TOTP_STEP_SECONDS",
    "hash_password",
    "new_totp_secret",
    "otpauth_uri",
    "password_matches",
    "totp_code",
    "totp_step_of",
]

MIN_PASSWORD = 12
MAX_PASSWORD = 1000
# scrypt's cost: 16 MiB and about 50 ms a try, the cost OWASP names as the floor for scrypt.
_N, _R, _P = 2**14, 8, 1
_MAXMEM = 64 * 1024 * 1024
TOTP_STEP_SECONDS = 30
TOTP_DIGITS = 6
# A code of the step before or after the server's is accepted too (clock drift).
TOTP_DRIFT_STEPS = 1


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def hash_password(password: str) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=_N, r=_R, p=_P, maxmem=_MAXMEM, dklen=32
    )
    return f"scrypt${_N}${_R}${_P}${_b64(salt)}${_b64(digest)}"


def password_matches(stored: str | None, password: str) -> bool:
    """Whether `password` is the one `stored` was made from. Without a stored hash a hash is still
    computed, so a caller cannot tell an unknown address from a wrong password by the time."""
    parts = (stored or "").split("$")
    if len(parts) != 6 or parts[0] != "scrypt":
        hash_password(password)
        return False
    n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
    salt, expected = base64.b64decode(parts[4]), base64.b64decode(parts[5])
    digest = hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=n, r=r, p=p, maxmem=_MAXMEM, dklen=len(expected)
    )
    return hmac.compare_digest(digest, expected)


def new_totp_secret() -> str:
    """160 random bits in base32, the length RFC 4226 recommends."""
    return base64.b32encode(secrets.token_bytes(20)).decode("ascii")


def totp_code(secret: str, step: int) -> str:
    key = base64.b32decode(secret)
    mac = hmac.new(key, struct.pack(">Q", step), hashlib.sha1).digest()
    offset = mac[-1] & 0x0F
    number = struct.unpack(">I", mac[offset : offset + 4])[0] & 0x7FFFFFFF
    return str(number % 10**TOTP_DIGITS).zfill(TOTP_DIGITS)


def totp_step_of(secret: str, code: str, now: datetime) -> int | None:
    """The time step whose code `code` is (within the drift), or None."""
    presented = "".join(code.split())
    if len(presented) != TOTP_DIGITS or not presented.isascii() or not presented.isdigit():
        return None
    current = int(now.timestamp()) // TOTP_STEP_SECONDS
    found = None
    for step in range(current - TOTP_DRIFT_STEPS, current + TOTP_DRIFT_STEPS + 1):
        # Every candidate is compared, so the time taken does not tell which step matched.
        if hmac.compare_digest(totp_code(secret, step), presented):
            found = step
    return found


def otpauth_uri(secret: str, account: str, issuer: str = "nachtwacht") -> str:
    """What an authenticator app reads (as a QR code or pasted): the Key URI Format."""
    label = quote(f"{issuer}:{account}", safe="@:")
    return f"otpauth://totp/{label}?" + urlencode(
        {"secret": secret, "issuer": issuer, "period": TOTP_STEP_SECONDS, "digits": TOTP_DIGITS}
    )
