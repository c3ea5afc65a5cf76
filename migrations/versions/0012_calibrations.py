"""Calibrations: a judge x condition's stored calibration map and what it was fitted on (docs/judges.md)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04 22:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "calibration",
        sa.Column("calibration_id", sa.String(length=40), nullable=False),
        sa.Column("tenant", sa.String(length=100), nullable=False),
        sa.Column("judge", sa.String(length=100), nullable=False),
        sa.Column("condition", sa.String(length=16), nullable=False),
        sa.Column("method", sa.String(length=16), nullable=False),
        sa.Column("cluster", sa.String(length=16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("applied", sa.Boolean(), nullable=False),
        sa.Column("fitted_on", sa.JSON(), nullable=False),
        sa.Column("fitted_map", sa.JSON(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("job_id", sa.String(length=40), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("calibration_id"),
    )
    with op.batch_alter_table("calibration", schema=None) as batch_op:
        batch_op.create_index("ix_calibration_scope", ["tenant", "judge", "condition", "created_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("calibration", schema=None) as batch_op:
        batch_op.drop_index("ix_calibration_scope")
    op.drop_table("calibration")
