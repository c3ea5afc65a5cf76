"""A mutant's record: seed, site, diff and what verification found

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 16:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("attempt", sa.Column("mutation", sa.JSON(), nullable=True))
    op.create_index("ix_attempt_parent", "attempt", ["parent_attempt_id"])


def downgrade() -> None:
    op.drop_index("ix_attempt_parent", table_name="attempt")
    op.drop_column("attempt", "mutation")
