"""The test servers' data goes to memory only where there is room for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.worlds import scratch


def test_a_writable_folder_with_room_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scratch, "SCRATCH_IN_MEMORY", tmp_path)
    monkeypatch.setattr(scratch, "SCRATCH_NEEDS_BYTES", 1)
    assert scratch.scratch_dir() == str(tmp_path)


def test_without_room_the_usual_tmp_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scratch, "SCRATCH_IN_MEMORY", tmp_path)
    monkeypatch.setattr(scratch, "SCRATCH_NEEDS_BYTES", 1024**6)  # an exabyte
    assert scratch.scratch_dir() is None


def test_a_missing_folder_or_a_file_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scratch, "SCRATCH_NEEDS_BYTES", 1)
    monkeypatch.setattr(scratch, "SCRATCH_IN_MEMORY", tmp_path / "absent")
    assert scratch.scratch_dir() is None
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    monkeypatch.setattr(scratch, "SCRATCH_IN_MEMORY", a_file)
    assert scratch.scratch_dir() is None
