"""The upgrade page states the versions an operator compares against what the commands print: the
contract this release speaks, the oldest it serves, and the database revision `migrate` ends at.
Each changes with a release, and a page left behind tells the operator the wrong one."""

from __future__ import annotations

import re
from pathlib import Path

from control_plane.api.agent_contract import OLDEST_AGENT_CONTRACT
from control_plane.schema_version import head_revision
from ground.contract import CONTRACT_VERSION

UPGRADING = Path(__file__).resolve().parents[2] / "docs" / "upgrading.md"


def _found(pattern: str) -> list[str]:
    return re.findall(pattern, UPGRADING.read_text(encoding="utf-8"))


def test_the_contract_version_stated_is_this_releases() -> None:
    assert _found(r"they speak \(currently `(\d+)`\)") == [str(CONTRACT_VERSION)]


def test_the_oldest_contract_stated_is_the_one_served() -> None:
    assert _found(r"\(`OLDEST_AGENT_CONTRACT`\) is (\d+)") == [str(OLDEST_AGENT_CONTRACT)]


def test_the_revision_migrate_ends_at_is_the_head() -> None:
    head = head_revision()
    assert _found(r"# database at revision (\S+)") == [head]
    assert _found(r"newer than this release's (\S+): left as it is") == [head]
