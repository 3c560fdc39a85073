"""The updater's state file: versioned, written atomically, refused when newer or corrupt."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from agent_daemon.errors import DaemonStateError
from agent_daemon.updater.update_records import UpdateRequest
from agent_daemon.updater.updater import Updater
from agent_daemon.updater.updater_settings import UpdaterSettings
from agent_daemon.updater.updater_state import (
    STATE_FILE_NAME,
    STATE_FORMAT_VERSION,
    Build,
    InProgress,
    UpdaterState,
    UpdaterStateStore,
)
from ground.clock import SystemClock
from tests.worlds.releases import ReleaseFactory


def sample_state() -> UpdaterState:
    return UpdaterState(
        floor=42,
        builds={
            "1.5.0": Build(
                manifest_version=42,
                issued_at=datetime(2026, 11, 30, 2, tzinfo=UTC),
                sha256="ab" * 32,
            )
        },
        bad_versions={"1.4.9": "2026-11-30T03:01:00Z: not healthy"},
        in_progress=InProgress(
            run_id="run-1",
            step="switching",
            version="1.6.0",
            manifest_b64="e30=",
            signature_b64="e30=",
            artifact_url="http://127.0.0.1:1/a",
            from_version="1.5.0",
            previous_before="1.4.1",
        ),
    )


def test_the_state_reads_back_as_written(tmp_path: Path) -> None:
    store = UpdaterStateStore(tmp_path)
    store.save(sample_state())
    assert store.load() == sample_state()
    document = json.loads((tmp_path / STATE_FILE_NAME).read_text())
    assert document["format_version"] == STATE_FORMAT_VERSION
    assert [p.name for p in tmp_path.iterdir()] == [STATE_FILE_NAME]


def test_no_file_is_an_empty_state(tmp_path: Path) -> None:
    assert UpdaterStateStore(tmp_path).load() == UpdaterState()


def test_the_state_protects_every_version_it_points_at() -> None:
    assert sample_state().protected_versions() == {"1.6.0", "1.5.0", "1.4.1"}


def test_a_state_file_from_a_newer_updater_is_refused_with_an_explanation(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE_NAME).write_text(json.dumps({"format_version": 99}))
    with pytest.raises(DaemonStateError, match="format_version 99 was written by a newer"):
        UpdaterStateStore(tmp_path).load()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param("{torn", "is not valid JSON", id="torn_json"),
        pytest.param('{"format_version": 1, "floor": "x"}', "floor", id="ill_typed"),
        pytest.param(
            '{"format_version": 1, "in_progress": {"step": "dancing"}}', "in_progress", id="step"
        ),
    ],
)
def test_a_corrupt_state_file_is_refused_naming_the_problem(
    tmp_path: Path, content: str, expected: str
) -> None:
    (tmp_path / STATE_FILE_NAME).write_text(content)
    with pytest.raises(DaemonStateError, match=expected):
        UpdaterStateStore(tmp_path).load()


def test_a_field_of_the_next_release_is_ignored_not_refused(tmp_path: Path) -> None:
    # After a switch back to this release it must still read what the next one wrote
    # (tests/rolling/test_state_files_across_releases holds both releases' files).
    (tmp_path / STATE_FILE_NAME).write_text('{"format_version": 1, "floor": 3, "surprise": 1}')
    assert UpdaterStateStore(tmp_path).load() == UpdaterState(floor=3)


def test_apply_with_a_newer_state_file_is_a_failed_outcome_that_changes_nothing(
    tmp_path: Path,
) -> None:
    factory = ReleaseFactory(workdir=tmp_path)
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    newer = json.dumps({"format_version": 99}).encode()
    (state_dir / STATE_FILE_NAME).write_bytes(newer)
    settings = UpdaterSettings(
        install_root=tmp_path / "root",
        state_dir=state_dir,
        trusted_keys=factory.trusted,
        platform="linux-x86_64",
        channel="stable",
        health_command=("true",),
    )
    release = factory.sign(b"x", version="1.5.0", manifest_version=42, unpacked_size=1)
    with httpx.Client() as client:
        outcome = Updater(settings=settings, client=client, clock=SystemClock()).apply(
            UpdateRequest(
                run_id="run-1",
                manifest=release.manifest_bytes,
                signature=release.signature,
                artifact_url="http://127.0.0.1:9/never-fetched",
            )
        )
    assert outcome.status == "failed"
    assert "written by a newer nachtwacht agent" in (outcome.error or "")
    assert (state_dir / STATE_FILE_NAME).read_bytes() == newer


def test_an_unwritable_state_directory_is_a_failed_outcome_not_an_exception(
    tmp_path: Path,
) -> None:
    factory = ReleaseFactory(workdir=tmp_path)
    blocked = tmp_path / "state"
    blocked.write_text("a file where the state directory should be")
    settings = UpdaterSettings(
        install_root=tmp_path / "root",
        state_dir=blocked,
        trusted_keys=factory.trusted,
        platform="linux-x86_64",
        channel="stable",
        health_command=("true",),
    )
    release = factory.sign(b"x", version="1.5.0", manifest_version=42, unpacked_size=1)
    with httpx.Client() as client:
        outcome = Updater(settings=settings, client=client, clock=SystemClock()).apply(
            UpdateRequest(
                run_id="run-1",
                manifest=release.manifest_bytes,
                signature=release.signature,
                artifact_url="http://127.0.0.1:9/never-fetched",
            )
        )
    assert (outcome.status, outcome.version) == ("failed", None)
    assert "update interrupted" in (outcome.error or "")
