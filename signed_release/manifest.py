"""The release manifest (docs/architecture.md "The signed release").

The signature covers the exact bytes of `manifest.json`, so an agent parses the very bytes it
verified and never re-serialises them. `parse_manifest` refuses anything two JSON readers could
read differently (duplicate keys, NaN, non-UTF-8) and every missing or ill-typed field, naming it.
Fields this code does not know are ignored, so an older agent can still take a newer manifest.

`product` says which program the build is: the managed agent (`agent`) or nachtwacht's own agent,
the updater (`updater`). It is signed like every field, so a build of one cannot be passed off as
the other. A manifest without it is an agent build: every release signed before the field existed
is one. The signer writes it only for the updater, so an agent build's signed bytes are the same as
they always were.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from ground.instants import InstantError, format_instant
from ground.instants import parse_instant as ground_parse_instant
from ground.limits import PRODUCTS, RELEASE_NAME_PATTERN, Product
from signed_release.errors import DuplicateField, InvalidField, MalformedManifest
from signed_release.patch_offer import (
    PatchOffer,
    check_delta_fields,
    delta_fields_from,
    delta_json,
)
from signed_release.versions import is_valid_version

__all__ = [
    "ARTIFACT_FORMAT",
    "MAX_MANIFEST_BYTES",
    "PRODUCTS",
    "Manifest",
    "Product",
    "format_instant",
    "parse_instant",
    "parse_manifest",
    "strict_json_object",
]

ARTIFACT_FORMAT: Final = "tar.gz"
MAX_MANIFEST_BYTES = 64 * 1024
# JSON integers beyond 2**53 are not exact in every reader.
_MAX_JSON_INT = 2**53 - 1
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(RELEASE_NAME_PATTERN)
_INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z", re.ASCII)


def parse_instant(field: str, value: object) -> datetime:
    """An RFC 3339 UTC instant written with `Z`, e.g. `2026-11-30T02:00:00Z`."""
    if not isinstance(value, str) or not _INSTANT.fullmatch(value):
        raise InvalidField(
            field, f"{value!r} is not an RFC 3339 UTC instant (expected e.g. 2026-11-30T02:00:00Z)"
        )
    try:
        return ground_parse_instant(value, field=field)
    except InstantError as exc:
        raise InvalidField(field, f"{value!r} is not a real date and time") from exc


@dataclass(frozen=True, kw_only=True)
class Manifest:
    """One signed release. Instants are aware UTC; `length` and `sha256` describe the artifact."""

    manifest_version: int
    issued_at: datetime
    expires: datetime
    channel: str
    platform: str
    agent_version: str
    length: int
    sha256: str
    unpacked_size: int
    allow_downgrade: bool = False
    artifact_format: Literal["tar.gz"] = ARTIFACT_FORMAT
    # Delta updates (signed_release/patch_offer.py): the uncompressed tar of the artifact and the
    # patches that make it from earlier builds' tars. Absent, the manifest is what it was before.
    tar_length: int | None = None
    tar_sha256: str | None = None
    patches: tuple[PatchOffer, ...] = ()
    product: Product = "agent"

    def __post_init__(self) -> None:
        check_delta_fields(self.tar_length, self.tar_sha256, self.patches)
        for name in ("manifest_version", "length", "unpacked_size"):
            _check_count(name, getattr(self, name), minimum=1 if name == "manifest_version" else 0)
        for name in ("issued_at", "expires"):
            value = getattr(self, name)
            if not isinstance(value, datetime) or value.utcoffset() is None:
                raise InvalidField(name, f"{value!r} is not an aware datetime")
        if self.expires <= self.issued_at:
            raise InvalidField(
                "expires",
                f"{format_instant(self.expires)} is not after issued_at "
                f"{format_instant(self.issued_at)}",
            )
        for name in ("channel", "platform"):
            value = getattr(self, name)
            if not isinstance(value, str) or not _NAME.fullmatch(value):
                raise InvalidField(
                    name,
                    f"{value!r} is not a name (expected lower-case letters, digits, '-' or '_', "
                    "e.g. stable, linux-x86_64)",
                )
        if not isinstance(self.agent_version, str) or not is_valid_version(self.agent_version):
            raise InvalidField(
                "agent_version",
                f"{self.agent_version!r} is not a version (expected MAJOR.MINOR.PATCH, e.g. 1.5.0)",
            )
        if not isinstance(self.sha256, str) or not _SHA256_HEX.fullmatch(self.sha256):
            raise InvalidField(
                "sha256", f"{self.sha256!r} is not 64 lower-case hex digits of a SHA-256"
            )
        if not isinstance(self.allow_downgrade, bool):
            raise InvalidField(
                "allow_downgrade", f"{self.allow_downgrade!r} is not a boolean (true or false)"
            )
        if self.artifact_format != ARTIFACT_FORMAT:
            raise InvalidField(
                "artifact_format", f"{self.artifact_format!r} is not supported (expected 'tar.gz')"
            )
        if self.product not in PRODUCTS:
            raise InvalidField(
                "product", f"{self.product!r} is not a product (expected 'agent' or 'updater')"
            )

    def to_json_object(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "agent_version": self.agent_version,
            "allow_downgrade": self.allow_downgrade,
            "artifact_format": self.artifact_format,
            "channel": self.channel,
            "expires": format_instant(self.expires),
            "issued_at": format_instant(self.issued_at),
            "length": self.length,
            "manifest_version": self.manifest_version,
            "platform": self.platform,
            "sha256": self.sha256,
            "unpacked_size": self.unpacked_size,
        } | delta_json(self.tar_length, self.tar_sha256, self.patches)
        if self.product != "agent":
            fields["product"] = self.product
        return fields

    def to_bytes(self) -> bytes:
        """The canonical bytes to sign: sorted keys, two-space indent, UTF-8, a final newline.
        Only the signer uses them; a verifier keeps the bytes it received."""
        return (json.dumps(self.to_json_object(), indent=2, sort_keys=True) + "\n").encode()


def _check_count(name: str, value: object, *, minimum: int) -> None:
    # bool is an int in Python but `true` is not a count in JSON.
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidField(name, f"{value!r} is not an integer")
    if not minimum <= value <= _MAX_JSON_INT:
        raise InvalidField(name, f"{value!r} is out of range (expected {minimum}..{_MAX_JSON_INT})")


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateField(
                f"{key}: appears more than once in one JSON object (expected each key once)"
            )
        result[key] = value
    return result


def _refuse_constant(name: str) -> Any:
    raise MalformedManifest(f"{name} is not valid JSON (expected a finite number)")


# Release documents are flat; the bounds keep a hostile one from reaching the parser's own limits
# (a RecursionError, or Python's 4,300-digit integer guard) and failing as something else.
MAX_JSON_DEPTH = 16
MAX_NUMBER_CHARACTERS = 32


def _nesting_depth(text: str) -> int:
    """The deepest nesting of arrays and objects, strings skipped, without recursing."""
    depth = deepest = 0
    in_string = escaped = False
    for character in text:
        if in_string:
            if escaped:
                escaped = False
            elif character == "\\":
                escaped = True
            elif character == '"':
                in_string = False
        elif character == '"':
            in_string = True
        elif character in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif character in "]}":
            depth -= 1
    return deepest


def _bounded_number(what: str, convert: Any) -> Any:
    def parse(text: str) -> Any:
        if len(text) > MAX_NUMBER_CHARACTERS:
            raise MalformedManifest(
                f"{what}: a number of {len(text)} characters "
                f"(expected at most {MAX_NUMBER_CHARACTERS})"
            )
        return convert(text)

    return parse


def strict_json_object(data: bytes, *, what: str, limit: int) -> dict[str, Any]:
    """Parse bytes as one UTF-8 JSON object, refusing duplicate keys, NaN, oversized input, deep
    nesting and absurdly long numbers. Raises MalformedManifest / DuplicateField; callers re-map
    for other documents."""
    if len(data) > limit:
        raise MalformedManifest(f"{what}: {len(data)} bytes is larger than the limit of {limit}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedManifest(f"{what}: not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    depth = _nesting_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise MalformedManifest(
            f"{what}: nested {depth} levels deep (expected at most {MAX_JSON_DEPTH})"
        )
    try:
        value = json.loads(
            text,
            object_pairs_hook=_refuse_duplicates,
            parse_constant=_refuse_constant,
            parse_int=_bounded_number(what, int),
            parse_float=_bounded_number(what, float),
        )
    except json.JSONDecodeError as exc:
        raise MalformedManifest(
            f"{what}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from exc
    if not isinstance(value, dict):
        raise MalformedManifest(
            f"{what}: the document is a JSON {type(value).__name__}, expected an object"
        )
    return value


_REQUIRED = (
    "manifest_version",
    "issued_at",
    "expires",
    "channel",
    "platform",
    "agent_version",
    "length",
    "sha256",
    "unpacked_size",
    "allow_downgrade",
    "artifact_format",
)


def parse_manifest(data: bytes) -> Manifest:
    """The manifest held by these exact bytes, or a ManifestError naming the field and value."""
    fields = strict_json_object(data, what="manifest", limit=MAX_MANIFEST_BYTES)
    missing = [name for name in _REQUIRED if name not in fields]
    if missing:
        raise InvalidField(missing[0], "is missing (required fields: " + ", ".join(_REQUIRED) + ")")
    return Manifest(
        manifest_version=fields["manifest_version"],
        issued_at=parse_instant("issued_at", fields["issued_at"]),
        expires=parse_instant("expires", fields["expires"]),
        channel=fields["channel"],
        platform=fields["platform"],
        agent_version=fields["agent_version"],
        length=fields["length"],
        sha256=fields["sha256"],
        unpacked_size=fields["unpacked_size"],
        allow_downgrade=fields["allow_downgrade"],
        artifact_format=fields["artifact_format"],
        **delta_fields_from(fields),
        product=fields.get("product", "agent"),
    )
