"""Similarity jobs' code pairs: the two programs, how to drive them, and their scores

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 19:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "similarity_pair",
        sa.Column("job_id", sa.String(length=40), sa.ForeignKey("job.job_id", ondelete="CASCADE"), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("pair_key", sa.String(length=200), nullable=False),
        sa.Column("problem_pk", sa.Integer(), sa.ForeignKey("problem.id"), nullable=True),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("entry_point", sa.String(length=200), nullable=True),
        sa.Column("reference_language", sa.String(length=16), nullable=False),
        sa.Column("reference_source", sa.Text(), nullable=False),
        sa.Column("candidate_language", sa.String(length=16), nullable=False),
        sa.Column("candidate_source", sa.Text(), nullable=False),
        sa.Column("input_spec", sa.JSON(), nullable=True),
        sa.Column("labels", sa.JSON(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("job_id", "ordinal"),
    )


def downgrade() -> None:
    op.drop_table("similarity_pair")
