"""Problems validated at creation: the jobs that run each reference solution against the problem's own tests

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04 21:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
# 0009 is another branch's; the chain is joined when both are merged.
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A nullable column with no default: ALTER TABLE ADD COLUMN on both SQLite and PostgreSQL, no rebuild. Problems
    # stored before it have none, and read as `unchecked`.
    op.add_column("problem", sa.Column("validation_jobs", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("problem") as batch:
        batch.drop_column("validation_jobs")
