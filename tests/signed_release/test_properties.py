"""Properties of the release format over generated inputs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from signed_release.manifest import Manifest, parse_manifest
from signed_release.versions import is_valid_version, version_key

names = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,20}", fullmatch=True)
numbers = st.integers(min_value=0, max_value=999)
versions = st.builds(
    lambda a, b, c, pre: f"{a}.{b}.{c}" + (f"-{pre}" if pre else ""),
    numbers,
    numbers,
    numbers,
    st.one_of(
        st.none(), st.from_regex(r"(rc|alpha|beta|[0-9])(\.[0-9a-z]{1,3}){0,2}", fullmatch=True)
    ),
)
instants = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
).map(lambda moment: moment.replace(microsecond=0))

manifests = st.builds(
    lambda issued, lifetime, **fields: Manifest(
        issued_at=issued, expires=issued + timedelta(seconds=lifetime), **fields
    ),
    issued=instants,
    lifetime=st.integers(min_value=1, max_value=10**8),
    manifest_version=st.integers(min_value=1, max_value=2**53 - 1),
    channel=names,
    platform=names,
    agent_version=versions.filter(is_valid_version),
    length=st.integers(min_value=0, max_value=2**53 - 1),
    sha256=st.from_regex(r"[0-9a-f]{64}", fullmatch=True),
    unpacked_size=st.integers(min_value=0, max_value=2**53 - 1),
    allow_downgrade=st.booleans(),
)

# No deadline and no generation-speed check: both time the machine (a loaded one pauses the
# process past hypothesis's 200 ms), not the release format.
properties = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@properties
@given(manifests)
def test_every_valid_manifest_reads_back_from_its_bytes(manifest: Manifest) -> None:
    assert parse_manifest(manifest.to_bytes()) == manifest


valid_versions = versions.filter(is_valid_version)


@properties
@given(valid_versions)
def test_a_prerelease_sorts_before_its_release(version: str) -> None:
    release = version.split("-", 1)[0]
    if version != release:
        assert version_key(version) < version_key(release)
    else:
        assert version_key(version) == version_key(release)


@properties
@given(valid_versions, valid_versions)
def test_version_order_is_total_and_antisymmetric(first: str, second: str) -> None:
    a, b = version_key(first), version_key(second)
    assert (a < b) + (a == b) + (a > b) == 1
    assert (a == b) == (first == second)
