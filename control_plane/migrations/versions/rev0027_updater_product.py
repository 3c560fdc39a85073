"""nachtwacht's own agent, the updater, as a product line of its own.

Revision ID: 0027_updater_product
Revises: 0026 (see `down_revision`)

- `releases.product`: `agent` (the managed agent; every release stored before) or `updater`
  (nachtwacht's own agent). The signed manifest names it; the column repeats it for the queries.
- `current_updater_releases`: the updater release each (channel, platform) is offered, one row
  per pair, beside `current_releases` (the managed agent's), which keeps its shape: the previous
  release writes it keyed by the pair alone. Its changes wake the answer memory like those of
  `current_releases`.
- `agent_updater_versions`: the version of nachtwacht's own agent each host last reported (no
  row: it has not said, e.g. an agent of the previous release). Which program a run updated is
  its release's product.
- An index for "the newest release of a product and pair".

Only `releases` is altered, and everything else this migration locks is `releases` or new: a
migration that locks two tables the replicas read, one after the other, deadlocks with a poll
that read the second before the first (PostgreSQL then aborts one of them: a replica's request).

Expand-only: a column with a constant default (no row rewritten) and a CHECK added NOT VALID (no
row scanned: `releases` is locked only for the catalogue change), new tables, an index, a trigger
on a new table. A replica of the previous release reads none of them. It does read
`releases` without the product: publish updater releases only once every replica runs this
release. The index is built inside
the migration's transaction (`CREATE INDEX CONCURRENTLY` cannot run there); `releases` holds a
few rows per release published, so the wait is short.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0026_release_patches"

revision = "0027_updater_product"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
-- The column's default is a constant, so adding it rewrites no row; its CHECK is added NOT VALID,
-- so no row is scanned under the lock (every existing row holds the default).
ALTER TABLE releases ADD COLUMN product text NOT NULL DEFAULT 'agent';
ALTER TABLE releases ADD CONSTRAINT releases_product_known
    CHECK (product IN ('agent', 'updater')) NOT VALID;

CREATE INDEX releases_product_pair_newest
    ON releases (product, channel, platform, manifest_version DESC);

CREATE TABLE current_updater_releases (
    channel    text        NOT NULL,
    platform   text        NOT NULL,
    release_id uuid        REFERENCES releases (id),
    changed_at timestamptz NOT NULL,
    PRIMARY KEY (channel, platform)
);

CREATE TRIGGER current_updater_releases_answer_change
    AFTER INSERT OR UPDATE OR DELETE ON current_updater_releases
    FOR EACH STATEMENT EXECUTE FUNCTION note_answer_change_for_all();

-- No foreign key to `agents`: creating one would lock `agents` too (see the docstring).
CREATE TABLE agent_updater_versions (
    agent_id    uuid        PRIMARY KEY,
    version     text        NOT NULL CHECK (length(version) BETWEEN 1 AND 100),
    reported_at timestamptz NOT NULL
);
"""

DOWNGRADE = """
DROP TABLE agent_updater_versions;
DROP TABLE current_updater_releases;
DROP INDEX releases_product_pair_newest;
ALTER TABLE releases DROP COLUMN product;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
