"""The activity file as another release of the daemon left it."""

from __future__ import annotations

import json
from pathlib import Path

from agent_daemon.host.activity import ACTIVITY_FORMAT_VERSION, ActivityFile


def test_a_newer_daemons_fields_are_passed_over_and_the_rest_is_read(tmp_path: Path) -> None:
    path = ActivityFile(tmp_path).path
    path.write_text(
        json.dumps(
            {
                "format_version": ACTIVITY_FORMAT_VERSION,
                "doing": "waiting for the next slot",
                "pid": 4242,
                "a_field_of_a_newer_release": {"anything": [1, 2]},
                "last_refusal": {
                    "at": "2026-11-30T02:00:00Z",
                    "code": "org_cap",
                    "message": "the organisation's cap is reached",
                    "said_by_a_newer_release": True,
                },
            }
        )
    )
    record = ActivityFile(tmp_path).load()
    assert record.doing == "waiting for the next slot"
    assert record.pid == 4242
    assert record.last_refusal is not None and record.last_refusal.code == "org_cap"
