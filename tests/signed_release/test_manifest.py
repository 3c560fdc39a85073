from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from signed_release.errors import DuplicateField, InvalidField, MalformedManifest, ManifestError
from signed_release.manifest import Manifest, parse_manifest
from tests.signed_release.conftest import manifest_fields, manifest_json


def test_a_manifest_reads_back_from_its_canonical_bytes(manifest: Manifest) -> None:
    assert parse_manifest(manifest.to_bytes()) == manifest


def test_canonical_bytes_are_stable_and_sorted(manifest: Manifest) -> None:
    data = manifest.to_bytes()
    assert data == manifest.to_bytes()
    assert data.startswith(b'{\n  "agent_version": "1.5.0",')
    assert data.endswith(b"}\n")


def test_instants_are_aware_utc() -> None:
    parsed = parse_manifest(manifest_json())
    assert parsed.issued_at == datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
    assert parsed.expires.tzinfo is not None


def test_unknown_fields_are_ignored_so_old_agents_accept_newer_manifests() -> None:
    assert parse_manifest(manifest_json(future_field={"x": 1})).agent_version == "1.5.0"


@pytest.mark.parametrize(
    ("data", "error", "expected"),
    [
        pytest.param(b"{not json", MalformedManifest, "not valid JSON", id="not_json"),
        pytest.param(b"\xff\xfe{}", MalformedManifest, "not UTF-8", id="not_utf8"),
        pytest.param(b"[1, 2]", MalformedManifest, "expected an object", id="array"),
        pytest.param(b'{"length": NaN}', MalformedManifest, "NaN", id="nan"),
        pytest.param(b" " * 70_000, MalformedManifest, "larger than the limit", id="oversized"),
        pytest.param(
            b'{"length": 1, "length": 2}', DuplicateField, "length: appears more", id="duplicate"
        ),
        pytest.param(
            b'{"a": {"b": 1, "b": 2}}', DuplicateField, "b: appears more", id="nested_duplicate"
        ),
    ],
)
def test_malformed_bytes_are_refused(
    data: bytes, error: type[ManifestError], expected: str
) -> None:
    with pytest.raises(error, match=expected):
        parse_manifest(data)


def test_a_duplicate_key_is_refused_even_when_both_values_agree() -> None:
    data = manifest_json().replace(b'"length": 1234', b'"length": 1234, "length": 1234')
    with pytest.raises(DuplicateField, match="length"):
        parse_manifest(data)


@pytest.mark.parametrize(
    ("overrides", "field", "shown"),
    [
        pytest.param({"manifest_version": "42"}, "manifest_version", "'42'", id="version_string"),
        pytest.param({"manifest_version": 0}, "manifest_version", "0", id="version_zero"),
        pytest.param({"manifest_version": True}, "manifest_version", "True", id="version_bool"),
        pytest.param({"manifest_version": 4.5}, "manifest_version", "4.5", id="version_float"),
        pytest.param({"length": -1}, "length", "-1", id="negative_length"),
        pytest.param({"length": 2**60}, "length", str(2**60), id="length_beyond_json"),
        pytest.param({"unpacked_size": None}, "unpacked_size", "None", id="unpacked_null"),
        pytest.param({"issued_at": "2026-11-30T02:00:00+01:00"}, "issued_at", "+01:00", id="not_z"),
        pytest.param({"issued_at": "2026-11-30 02:00"}, "issued_at", "02:00", id="not_rfc3339"),
        pytest.param({"expires": "2026-02-30T02:00:00Z"}, "expires", "02-30", id="impossible_date"),
        pytest.param(
            {"expires": "\u0662\u0660\u0662\u0667-11-30T02:00:00Z"},
            "expires",
            "T02:00:00Z",
            id="arabic_indic_year",
        ),
        pytest.param(
            {"expires": "2026-11-30T01:00:00Z"}, "expires", "not after", id="expires_before_issue"
        ),
        pytest.param({"channel": "Stable!"}, "channel", "Stable!", id="channel_chars"),
        pytest.param({"platform": ""}, "platform", "''", id="platform_empty"),
        pytest.param({"agent_version": "1.5"}, "agent_version", "'1.5'", id="version_two_parts"),
        pytest.param(
            {"agent_version": "../../etc"}, "agent_version", "etc", id="version_path_escape"
        ),
        pytest.param({"sha256": "AB" * 32}, "sha256", "AB", id="sha_upper"),
        pytest.param({"sha256": "ab" * 31}, "sha256", "abab", id="sha_short"),
        pytest.param({"allow_downgrade": "false"}, "allow_downgrade", "'false'", id="bool_string"),
        pytest.param({"artifact_format": "zip"}, "artifact_format", "'zip'", id="format_zip"),
    ],
)
def test_ill_typed_fields_are_refused_naming_field_and_value(
    overrides: dict[str, Any], field: str, shown: str
) -> None:
    with pytest.raises(InvalidField) as caught:
        parse_manifest(manifest_json(**overrides))
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")
    assert shown in str(caught.value)


@pytest.mark.parametrize("missing", list(manifest_fields()), ids=list(manifest_fields()))
def test_every_field_is_required(missing: str) -> None:
    fields = manifest_fields()
    del fields[missing]
    with pytest.raises(InvalidField, match=f"^{missing}: is missing"):
        parse_manifest(json.dumps(fields).encode())


def test_a_naive_datetime_is_refused_when_building() -> None:
    with pytest.raises(InvalidField, match="issued_at"):
        Manifest(
            manifest_version=1,
            issued_at=datetime(2026, 11, 30),
            expires=datetime(2026, 12, 30, tzinfo=UTC),
            channel="stable",
            platform="linux-x86_64",
            agent_version="1.0.0",
            length=1,
            sha256="ab" * 32,
            unpacked_size=1,
        )


@pytest.mark.parametrize(
    ("data", "match"),
    [
        pytest.param(
            b'{"manifest_version": ' + b"9" * 5000 + b"}",
            "a number of 5000 characters",
            id="five_thousand_digit_number",
        ),
        pytest.param(
            b'{"length": 1' + b"0" * 400 + b".5}", "a number of 403 characters", id="huge_float"
        ),
        pytest.param(b'{"a":' * 3000 + b"1" + b"}" * 3000, "levels deep", id="deep_objects"),
        pytest.param(b'{"a":' + b"[" * 40 + b"]" * 40 + b"}", "41 levels deep", id="deep_arrays"),
    ],
)
def test_a_manifest_built_to_break_the_parser_is_refused_as_malformed(
    data: bytes, match: str
) -> None:
    with pytest.raises(MalformedManifest, match=match):
        parse_manifest(data)


def test_brackets_inside_strings_are_not_nesting() -> None:
    with pytest.raises(InvalidField, match="is missing"):
        parse_manifest(json.dumps({"channel": "[" * 100 + '\\"{' * 50}).encode())
