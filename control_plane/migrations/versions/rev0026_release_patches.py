"""Delta updates: the patches a release offers, and the bytes served per release and kind.

Revision ID: 0026_release_patches
Revises: 0025 (see `down_revision`)

- `release_patches`: one row per (release, base tar sha256), the patch's bytes and its signed
  length and sha256. EXTERNAL storage, as the artifact's: a zstd frame does not compress again
  and a byte range is read without reading the whole value.
- `release_bytes_served`: bytes of artifacts and patches served per release and kind, counted
  as a download answers, read by /metrics.

Expand-only: two new tables. A replica of the previous release reads neither, and serves the full
artifact as before.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0025_people"

revision = "0026_release_patches"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE release_patches (
    release_id      uuid   NOT NULL REFERENCES releases (id) ON DELETE CASCADE,
    base_tar_sha256 text   NOT NULL CHECK (base_tar_sha256 ~ '^[0-9a-f]{64}$'),
    length          bigint NOT NULL CHECK (length > 0),
    sha256          text   NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    content         bytea  NOT NULL,
    PRIMARY KEY (release_id, base_tar_sha256)
);
ALTER TABLE release_patches ALTER COLUMN content SET STORAGE EXTERNAL;

CREATE TABLE release_bytes_served (
    release_id uuid   NOT NULL REFERENCES releases (id) ON DELETE CASCADE,
    kind       text   NOT NULL CHECK (kind IN ('patch', 'full')),
    bytes      bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0),
    PRIMARY KEY (release_id, kind)
);
"""

DOWNGRADE = """
DROP TABLE release_bytes_served;
DROP TABLE release_patches;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
