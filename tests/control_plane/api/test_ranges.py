"""`Range` / `If-Range` parsing for the artifact download (pure; the HTTP path is tested with the
real server in test_runs_and_artifact.py)."""

from __future__ import annotations

import pytest

from control_plane.runs.ranges import ByteRange, Unsatisfiable, requested_range

ETAG = '"abc"'
SIZE = 100


@pytest.mark.parametrize(
    ("range_header", "if_range", "expected"),
    [
        pytest.param(None, None, None, id="no_range"),
        pytest.param("bytes=0-9", None, ByteRange(start=0, end=9), id="first_ten"),
        pytest.param("bytes=90-", None, ByteRange(start=90, end=99), id="open_end"),
        pytest.param("bytes=-10", None, ByteRange(start=90, end=99), id="suffix"),
        pytest.param("bytes=-500", None, ByteRange(start=0, end=99), id="suffix_longer_than_body"),
        pytest.param("bytes=50-500", None, ByteRange(start=50, end=99), id="end_clamped"),
        pytest.param("bytes=0-9", ETAG, ByteRange(start=0, end=9), id="if_range_matches"),
        pytest.param("bytes=0-9", '"other"', None, id="if_range_stale_gets_whole"),
        pytest.param("bytes=9-0", None, None, id="reversed_ignored"),
        pytest.param("bytes=0-9,20-29", None, None, id="multiple_ranges_ignored"),
        pytest.param("items=0-9", None, None, id="other_unit_ignored"),
        pytest.param("bytes=-", None, None, id="empty_range_ignored"),
    ],
)
def test_requested_range(range_header: str | None, if_range: str | None, expected: object) -> None:
    assert requested_range(range_header, if_range, etag=ETAG, size=SIZE) == expected


@pytest.mark.parametrize(
    "range_header",
    [
        pytest.param("bytes=100-", id="start_at_length"),
        pytest.param("bytes=500-600", id="start_past_length"),
        pytest.param("bytes=-0", id="empty_suffix"),
    ],
)
def test_unsatisfiable_range(range_header: str) -> None:
    with pytest.raises(Unsatisfiable):
        requested_range(range_header, None, etag=ETAG, size=SIZE)
