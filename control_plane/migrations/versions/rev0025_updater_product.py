"""nachtwacht's own agent, the updater, as a product line of its own.

Revision ID: 0025_updater_product
Revises: 0020 (see `down_revision`)

- `releases.product`: `agent` (the managed agent; every release stored before) or `updater`
  (nachtwacht's own agent). The signed manifest names it; the column repeats it for the queries.
- `current_updater_releases`: the updater release each (channel, platform) is offered, one row
  per pair, beside `current_releases` (the managed agent's), which keeps its shape: the previous
  release writes it keyed by the pair alone. Its changes wake the answer memory like those of
  `current_releases`.
- `runs.product`: which program a run updated (`agent` for every run before).
- `agents.updater_version`: the version of nachtwacht's own agent the host last reported (NULL:
  it has not said, e.g. an agent of the previous release).
- An index for "the newest release of a product and pair".

Expand-only: columns with defaults or NULL, a new table, an index, a trigger on the new table. A
replica of the previous release reads none of them. It does read `releases` without the product:
publish updater releases only once every replica runs this release. The index is built inside
the migration's transaction (`CREATE INDEX CONCURRENTLY` cannot run there); `releases` holds a
few rows per release published, so the wait is short.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0020_retention"

revision = "0025_updater_product"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
ALTER TABLE releases
    ADD COLUMN product text NOT NULL DEFAULT 'agent'
        CONSTRAINT releases_product_known CHECK (product IN ('agent', 'updater'));

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

ALTER TABLE runs
    ADD COLUMN product text NOT NULL DEFAULT 'agent'
        CONSTRAINT runs_product_known CHECK (product IN ('agent', 'updater'));

ALTER TABLE agents
    ADD COLUMN updater_version text
        CONSTRAINT agents_updater_version_is_a_version
        CHECK (length(updater_version) BETWEEN 1 AND 100);
"""

DOWNGRADE = """
ALTER TABLE agents DROP COLUMN updater_version;
ALTER TABLE runs DROP COLUMN product;
DROP TABLE current_updater_releases;
DROP INDEX releases_product_pair_newest;
ALTER TABLE releases DROP COLUMN product;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
