from __future__ import annotations

import pytest

from signed_release.versions import is_valid_version, version_key


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        pytest.param("1.4.1", "1.5.0", id="minor"),
        pytest.param("1.9.0", "1.10.0", id="numeric_not_lexical"),
        pytest.param("1.5.0-rc.1", "1.5.0", id="prerelease_before_release"),
        pytest.param("1.5.0-rc.2", "1.5.0-rc.10", id="numeric_prerelease"),
        pytest.param("1.5.0-1", "1.5.0-alpha", id="numeric_before_alpha"),
        pytest.param("1.5.0-alpha", "1.5.0-alpha.1", id="shorter_prerelease_first"),
    ],
)
def test_versions_order_as_semver(older: str, newer: str) -> None:
    assert version_key(older) < version_key(newer)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("1.5", id="two_parts"),
        pytest.param("01.5.0", id="leading_zero"),
        pytest.param("1.5.0/..", id="path"),
        pytest.param("1.5.0+build", id="build_metadata"),
        pytest.param(" 1.5.0", id="space"),
        pytest.param("1.5.0-rc.01", id="prerelease_leading_zero"),
        pytest.param("1.5.0-", id="empty_prerelease"),
        pytest.param("1.5.0-rc..1", id="empty_identifier"),
        # Digits of other scripts: `int` reads "1\u0663" as 13, so two strings would compare
        # equal and name two folders.
        pytest.param("1\u0663.0.0", id="arabic_indic_major"),
        pytest.param("1.5.0-rc.1\u0663", id="arabic_indic_prerelease"),
        pytest.param("1.\uff15.0", id="fullwidth_minor"),
    ],
)
def test_non_versions_are_refused(value: str) -> None:
    assert not is_valid_version(value)
    with pytest.raises(ValueError, match="not a version"):
        version_key(value)
