"""A migration is frozen: it writes its values out, and the migrated schema still agrees with the
contract.

A migration that imported the contract's enums (or the planner's pattern) would run different SQL
the day those change: a database built fresh and one upgraded long ago would then hold different
constraints under one revision. So no migration imports from the project, and the head schema's
CHECK lists — read from the migrated database, not from the migration text — are compared with the
enums they mirror. A difference is fixed by a new migration, never by editing an applied one.
"""

from __future__ import annotations

import ast
import enum
import re
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

import psycopg
import pytest

from control_plane import migrate
from control_plane.runs.views import StoppedBy
from ground.contract import (
    HoldView,
    MissReason,
    OutcomeReason,
    OutcomeStatus,
    PatchFallbackReason,
    RefusalCode,
)
from ground.contract.messages import DeliveryReport, NothingToDoReport
from tests.conftest import REPO_ROOT

VERSIONS = Path(migrate.MIGRATIONS_DIR) / "versions"

NEW_MIGRATION = (
    "the migrated CHECK {constraint} lists {found}, the contract has {expected}: write a new"
    " migration that replaces the constraint (never edit an applied one)"
)


def _project_packages() -> frozenset[str]:
    return frozenset(path.parent.name for path in REPO_ROOT.glob("*/__init__.py"))


def project_imports(source: str) -> list[str]:
    """The modules of this repository that `source` imports."""
    packages = _project_packages()
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.ImportFrom):
            names = ["." * node.level + (node.module or "")]
        else:
            continue
        found += [name for name in names if name.startswith(".") or name.split(".")[0] in packages]
    return found


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("from ground.contract import OutcomeReason\n", id="contract_enum"),
        pytest.param("from shared_planner.patterns import MAX_TIMES\n", id="planner_constant"),
        pytest.param("import control_plane.claims.slots\n", id="plain_import"),
        pytest.param("from . import rev0001_orgs_agents_credentials\n", id="relative_import"),
        pytest.param("def upgrade():\n    from ground import limits\n", id="inside_a_function"),
    ],
)
def test_an_import_from_the_project_is_found(source: str) -> None:
    assert project_imports(source)


def test_alembic_and_the_standard_library_are_not_the_project() -> None:
    source = "from __future__ import annotations\nimport re\nfrom alembic import op\n"
    assert project_imports(source) == []


@pytest.mark.parametrize(
    "migration", sorted(VERSIONS.glob("rev*.py")), ids=lambda path: path.stem.split("_")[0]
)
def test_no_migration_imports_from_the_project(migration: Path) -> None:
    imported = project_imports(migration.read_text(encoding="utf-8"))
    assert imported == [], (
        f"{migration.name} imports {imported}: a migration writes its values out as they are"
        " today, so the SQL it runs never changes after it was applied"
    )


@pytest.fixture
def conn(database_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(database_url, autocommit=True) as connection:
        yield connection


def check_values(conn: psycopg.Connection[tuple[object, ...]], constraint: str) -> set[str]:
    """The string literals a migrated CHECK constraint lists, as PostgreSQL holds it."""
    row = conn.execute(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE contype = 'c' AND conname = %s",
        [constraint],
    ).fetchone()
    assert row is not None, f"no CHECK constraint named {constraint} in the migrated schema"
    return set(re.findall(r"'((?:[^']|'')*)'::text", str(row[0])))


def test_check_values_reads_the_list_postgresql_holds(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    # The reader must see what the database enforces, so a constraint it misreads is caught here.
    conn.execute(
        "CREATE TABLE probe (kind text CONSTRAINT probe_kind_known CHECK (kind IN ('a', 'it''s')))"
    )
    assert check_values(conn, "probe_kind_known") == {"a", "it''s"}


def _values(members: type[enum.StrEnum]) -> set[str]:
    return {member.value for member in members}


# The refusals that consume a scheduled slot without a token, recorded as a `skipped` run.
SKIP_REASONS = (RefusalCode.HELD, RefusalCode.RELEASE_ROLLED_BACK, RefusalCode.RELEASE_HALTED)

MIRRORED_CHECKS = [
    pytest.param("runs_miss_reason_known", _values(MissReason), id="runs_miss_reason"),
    pytest.param("runs_outcome_reason_known", _values(OutcomeReason), id="runs_outcome_reason"),
    # A skipped run's reason is one of the contract's refusals that consume the slot without a
    # token: nothing to do for this slot, recorded so the agent page says why.
    pytest.param(
        "runs_skip_reason_known",
        {code.value for code in SKIP_REASONS},
        id="runs_skip_reason",
    ),
    # The refusals a claim is retried after (they consume nothing), kept to explain a miss.
    pytest.param(
        "claim_refusals_reason_check",
        {code.value for code in RefusalCode if code.is_cap} | {RefusalCode.BRAKE.value},
        id="claim_refusals_reason",
    ),
    pytest.param(
        "runs_patch_fallback_reason_known",
        _values(PatchFallbackReason),
        id="runs_patch_fallback_reason",
    ),
    pytest.param(
        "patch_fallback_counts_reason_known",
        _values(PatchFallbackReason),
        id="patch_fallback_counts_reason",
    ),
    pytest.param(
        "runs_delivery_known",
        set(get_args(DeliveryReport.model_fields["kind"].annotation)),
        id="runs_delivery",
    ),
    pytest.param("runs_stopped_by_known", set(get_args(StoppedBy)), id="runs_stopped_by"),
    pytest.param(
        "holds_set_by_check",
        set(get_args(HoldView.model_fields["set_by"].annotation)),
        id="holds_set_by",
    ),
]


@pytest.mark.parametrize(("constraint", "expected"), MIRRORED_CHECKS)
def test_the_head_schema_lists_the_contracts_values(
    conn: psycopg.Connection[tuple[object, ...]], constraint: str, expected: set[str]
) -> None:
    found = check_values(conn, constraint)
    assert found == expected, NEW_MIGRATION.format(
        constraint=constraint, found=sorted(found), expected=sorted(expected)
    )


def test_the_refusals_kept_for_a_miss_consume_nothing() -> None:
    kept = {code.value for code in RefusalCode if code.is_cap} | {RefusalCode.BRAKE.value}
    assert not any(RefusalCode(code).consumes_slot for code in kept)


def test_every_skip_reason_consumes_the_slot() -> None:
    assert all(code.consumes_slot for code in SKIP_REASONS)


def test_a_run_can_hold_every_status_an_agent_reports(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    reported = set(get_args(OutcomeStatus)) | set(
        get_args(NothingToDoReport.model_fields["status"].annotation)
    )
    found = check_values(conn, "runs_status_check")
    assert reported <= found, NEW_MIGRATION.format(
        constraint="runs_status_check", found=sorted(found), expected=f"{sorted(reported)} at least"
    )


def test_every_fallback_reason_has_its_count_from_the_start(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    counted = {str(row[0]) for row in conn.execute("SELECT reason FROM patch_fallback_counts")}
    assert counted == _values(PatchFallbackReason)
