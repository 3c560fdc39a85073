"""The migrations newer than the previous release only expand the schema.

While they run, and until the last replica is upgraded, the previous release keeps serving on the
new schema (`test_expand_then_contract`). So what a new migration's upgrade runs must not take
away or change anything that release reads or writes:

    DROP …                      a table, a column, a default, a view … (a constraint, trigger,
                                index or function dropped and made again under its own name in
                                the same migration is allowed: the way a wider CHECK or a trigger
                                that also notes a new table is written; it must not narrow)
    RENAME                      a table, a column, a constraint
    ALTER COLUMN … TYPE         a type change
    ALTER COLUMN … SET NOT NULL the previous release may still write NULL there
    ADD COLUMN … NOT NULL       without a DEFAULT: the previous release's inserts do not name it

A contract step (removing what the release before stopped using) waits one release after the
last release that read it, and says so: a module-level `CONTRACT_STEP = "…"` naming what it
removes and the release that stopped reading it. Only such a migration may do the above.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from control_plane.schema_version import VERSIONS_DIR
from nachtwacht.demo_world.children import Subprocesses

CONTRACT_MARK = "CONTRACT_STEP"

_COMMENT = re.compile(r"--[^\n]*|/\*.*?\*/", re.DOTALL)
_QUOTED = re.compile(r"'(?:[^']|'')*'")
_FORBIDDEN = [
    (re.compile(r"\bRENAME\b", re.I), "renames"),
    (re.compile(r"\bALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE\b", re.I), "changes a type"),
    (re.compile(r"\bALTER\s+COLUMN\s+\S+\s+SET\s+NOT\s+NULL\b", re.I), "sets NOT NULL"),
    (re.compile(r"\bTRUNCATE\b", re.I), "truncates"),
]
_DROP = re.compile(
    r"\bDROP\s+(?P<kind>CONSTRAINT|TRIGGER|INDEX|FUNCTION)\s+(IF\s+EXISTS\s+)?(?P<name>\w+)"
    r"|\bDROP\s+\w+",
    re.I,
)
# What puts a dropped constraint, trigger, index or function back under its own name.
_RECREATED = {
    "CONSTRAINT": r"\bADD\s+CONSTRAINT\s+{}\b",
    "TRIGGER": r"\bCREATE\s+(OR\s+REPLACE\s+)?TRIGGER\s+{}\b",
    "INDEX": r"\bCREATE\s+(UNIQUE\s+)?INDEX\s+(CONCURRENTLY\s+)?(IF\s+NOT\s+EXISTS\s+)?{}\b",
    "FUNCTION": r"\bCREATE\s+(OR\s+REPLACE\s+)?FUNCTION\s+{}\b",
}
_ADD_COLUMN = re.compile(r"\bADD\s+COLUMN\s+(IF\s+NOT\s+EXISTS\s+)?", re.I)
_ALEMBIC_OPS = re.compile(r"^(drop_\w+|alter_column|rename_table|execute_if)$")


def contract_problems(sql: str) -> list[str]:
    """What in `sql` (a migration's upgrade) is not an expansion, in words; [] when it only
    expands."""
    text = _QUOTED.sub("''", _COMMENT.sub(" ", sql))
    problems = [
        f"{what}: {match.group(0)!r}"
        for pattern, what in _FORBIDDEN
        for match in pattern.finditer(text)
    ]
    for match in _DROP.finditer(text):
        kind, name = match.group("kind"), match.group("name")
        replaced = kind is not None and re.search(
            _RECREATED[kind.upper()].format(re.escape(name)), text[match.end() :], re.I
        )
        if not replaced:
            problems.append(f"drops: {match.group(0)!r}")
    for match in _ADD_COLUMN.finditer(text):
        definition = _column_definition(text, match.end())
        upper = " ".join(definition.upper().split())
        if "NOT NULL" in upper and "DEFAULT" not in upper and "GENERATED" not in upper:
            problems.append(f"adds a NOT NULL column without a DEFAULT: {definition.strip()!r}")
    return problems


def _column_definition(text: str, start: int) -> str:
    """From `start` to the end of one column's definition (a top-level comma or semicolon)."""
    depth = 0
    for index in range(start, len(text)):
        char = text[index]
        if char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                return text[start:index]
            depth -= 1
        elif char in ",;" and depth == 0:
            return text[start:index]
    return text[start:]


def upgrade_sql(source: str) -> tuple[str, list[str], str | None]:
    """(the SQL text `upgrade()` runs, the Alembic operations it calls that contract, the
    module's `CONTRACT_STEP` text or None): its string literals, and the module-level strings
    it names."""
    tree = ast.parse(source)
    constants: dict[str, str] = {}
    for node in tree.body:
        value = _text(node.value) if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Name):
                constants[target.id] = value
    upgrade = next(
        (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "upgrade"), None
    )
    assert upgrade is not None, "a migration without upgrade()"
    texts: list[str] = []
    operations: list[str] = []
    for node in ast.walk(upgrade):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            texts.append(node.value)
        elif isinstance(node, ast.JoinedStr) and (joined := _text(node)) is not None:
            texts.append(joined)
        elif isinstance(node, ast.Name) and node.id in constants:
            texts.append(constants[node.id])
        elif isinstance(node, ast.Attribute) and _ALEMBIC_OPS.match(node.attr):
            operations.append(f"op.{node.attr}")
    return ";\n".join(texts), operations, constants.get(CONTRACT_MARK)


def _text(node: ast.expr | None) -> str | None:
    """A string literal's text; an f-string's with each interpolation as `?`; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_text(part) or "?" for part in node.values)
    return None


def _newer_migrations(previous: Subprocesses) -> list[Path]:
    assert previous.checkout is not None
    before = {
        path.name
        for path in (previous.checkout / "control_plane" / "migrations" / "versions").glob(
            "rev*.py"
        )
    }
    return sorted(path for path in VERSIONS_DIR.glob("rev*.py") if path.name not in before)


def test_every_migration_newer_than_the_previous_release_only_expands(
    previous_release: Subprocesses,
) -> None:
    found = {}
    for path in _newer_migrations(previous_release):
        sql, operations, contract_step = upgrade_sql(path.read_text())
        if contract_step is not None:
            assert contract_step.strip(), f"{path.name}: {CONTRACT_MARK} says nothing"
            continue
        problems = contract_problems(sql) + [f"calls {op}" for op in operations]
        if problems:
            found[path.name] = problems
    assert found == {}, (
        "a migration the previous release must keep serving beside takes something away; "
        f"make it expand-only, or a marked contract step a release later: {found}"
    )


# -- the checker, with the statements it exists to stop -------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param("DROP TABLE runs_old;", id="drop_table"),
        pytest.param("ALTER TABLE runs DROP COLUMN miss_reason;", id="drop_column"),
        pytest.param("ALTER TABLE runs ALTER COLUMN status DROP DEFAULT;", id="drop_default"),
        pytest.param("ALTER TABLE runs DROP CONSTRAINT runs_status_check;", id="drop_check"),
        pytest.param("ALTER TABLE agents RENAME COLUMN name TO agent_name;", id="rename_column"),
        pytest.param("ALTER TABLE agents RENAME TO hosts;", id="rename_table"),
        pytest.param("ALTER TABLE runs ALTER COLUMN slot_key TYPE varchar(32);", id="type"),
        pytest.param(
            "ALTER TABLE runs ALTER COLUMN slot_key SET DATA TYPE varchar(32);", id="data_type"
        ),
        pytest.param("ALTER TABLE runs ALTER COLUMN reason SET NOT NULL;", id="set_not_null"),
        pytest.param("ALTER TABLE runs ADD COLUMN shard integer NOT NULL;", id="not_null_column"),
        pytest.param(
            "ALTER TABLE runs ADD COLUMN a text, ADD COLUMN b numeric(10, 2) NOT NULL;",
            id="second_column_not_null",
        ),
        pytest.param("TRUNCATE events;", id="truncate"),
        pytest.param(
            "DROP TRIGGER agents_answer_change ON agents;\n"
            "CREATE TRIGGER agents_other_change AFTER UPDATE ON agents "
            "FOR EACH ROW EXECUTE FUNCTION note_change();",
            id="trigger_dropped_another_made",
        ),
        pytest.param("DROP INDEX runs_by_slot;", id="drop_index"),
    ],
)
def test_the_checker_refuses_what_takes_something_away(sql: str) -> None:
    assert contract_problems(sql) != []


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param(
            "CREATE TABLE kept (id uuid PRIMARY KEY, n bigint NOT NULL DEFAULT 0);", id="table"
        ),
        pytest.param("ALTER TABLE runs ADD COLUMN shard integer;", id="nullable_column"),
        pytest.param(
            "ALTER TABLE runs ADD COLUMN shard integer NOT NULL DEFAULT 0;", id="with_default"
        ),
        pytest.param("CREATE INDEX runs_by_slot ON runs (slot_key);", id="index"),
        pytest.param(
            "ALTER TABLE events DROP CONSTRAINT events_kind_check, ADD CONSTRAINT "
            "events_kind_check CHECK (kind IN ('a', 'b', 'c'));",
            id="check_replaced_under_its_name",
        ),
        pytest.param(
            "DROP TRIGGER agents_answer_change ON agents;\n"
            "CREATE TRIGGER agents_answer_change AFTER UPDATE ON agents "
            "FOR EACH ROW EXECUTE FUNCTION note_change();",
            id="trigger_replaced_under_its_name",
        ),
        pytest.param(
            "-- we never DROP TABLE here\nCOMMENT ON TABLE runs IS 'do not RENAME';",
            id="words_in_comments_and_strings",
        ),
    ],
)
def test_the_checker_lets_expansions_through(sql: str) -> None:
    assert contract_problems(sql) == []


def test_the_checker_reads_what_upgrade_runs_and_not_the_downgrade() -> None:
    source = """
from alembic import op

UPGRADE = "ALTER TABLE agents RENAME COLUMN name TO agent_name"
DOWNGRADE = "DROP TABLE things"


def upgrade() -> None:
    op.execute(UPGRADE)
    op.drop_column("agents", "name")


def downgrade() -> None:
    op.execute(DOWNGRADE)
"""
    sql, operations, contract_step = upgrade_sql(source)
    assert "RENAME" in sql and "DROP TABLE" not in sql
    assert operations == ["op.drop_column"]
    assert contract_step is None
    marked = upgrade_sql(source + '\nCONTRACT_STEP = "agents.name: unread since 0.3"\n')
    assert marked[2] == "agents.name: unread since 0.3"


def test_every_migration_of_the_previous_release_reads_as_sql_to_the_checker() -> None:
    # The checker understands the way this repository writes migrations: every file's upgrade
    # yields SQL text (a file whose SQL it could not find would pass unread).
    for path in sorted(VERSIONS_DIR.glob("rev*.py")):
        sql, _, _ = upgrade_sql(path.read_text())
        assert re.search(r"\b(CREATE|ALTER|INSERT|UPDATE|COMMENT)\b", sql, re.I), path.name
