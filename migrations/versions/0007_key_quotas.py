"""API keys' quotas: a JSON object of limits, null (or a null member) meaning the configured default

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02 04:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A nullable column with no default: an ALTER TABLE ADD COLUMN on both SQLite and PostgreSQL, no rebuild.
    op.add_column("api_key", sa.Column("quotas", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_key") as batch:
        batch.drop_column("quotas")
