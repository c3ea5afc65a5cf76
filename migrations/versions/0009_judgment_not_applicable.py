"""Judgments that do not apply: judgment.status widens from VARCHAR(8) to VARCHAR(16) for `not_applicable` (a judge
that does not apply to an attempt, e.g. no reference solution or no public tests, recorded with its reason)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04 21:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # PostgreSQL widens a VARCHAR in place; SQLite does not enforce the length, and batch mode rebuilds the table
    # only where ALTER COLUMN is missing (SQLite), keeping its rows, keys and indexes.
    with op.batch_alter_table("judgment") as batch:
        batch.alter_column(
            "status", existing_type=sa.String(length=8), type_=sa.String(length=16), existing_nullable=False
        )


def downgrade() -> None:
    # The older schema knows only ok and failed: a row that did not apply becomes a failed one with its reason
    # (which is how it was recorded before), so that it fits VARCHAR(8) and an older worker reads it.
    op.execute(sa.text("UPDATE judgment SET status = 'failed' WHERE status = 'not_applicable'"))
    with op.batch_alter_table("judgment") as batch:
        batch.alter_column(
            "status", existing_type=sa.String(length=16), type_=sa.String(length=8), existing_nullable=False
        )
