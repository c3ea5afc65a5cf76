"""Judgments weighted by token probabilities: the probability of each allowed score, the expected score, the mass
of acceptance and the method, beside the sampled score; the response cache keeps the probabilities with the reply

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04 18:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable columns with no default: ALTER TABLE ADD COLUMN on both SQLite and PostgreSQL, no rebuild.
    op.add_column("judgment", sa.Column("weighted_p_ac", sa.Float(), nullable=True))
    op.add_column("judgment", sa.Column("weighted_score", sa.Float(), nullable=True))
    op.add_column("judgment", sa.Column("score_probs", sa.JSON(), nullable=True))
    op.add_column("judgment", sa.Column("weighting", sa.String(length=40), nullable=True))
    op.add_column("judge_response_cache", sa.Column("score_probs", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("judge_response_cache") as batch:
        batch.drop_column("score_probs")
    with op.batch_alter_table("judgment") as batch:
        for column in ("weighting", "score_probs", "weighted_score", "weighted_p_ac"):
            batch.drop_column(column)
