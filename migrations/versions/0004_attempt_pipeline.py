"""Attempt pipeline and stage: which stages an attempt goes through is data, and where it is

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 16:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMNs, never a batch table rebuild: on SQLite a rebuild drops the old `attempt` table, and with
    # foreign keys on that would cascade into every execution and judgment.
    op.add_column("attempt", sa.Column("pipeline", sa.JSON(), nullable=True))
    op.add_column("attempt", sa.Column("stage", sa.String(length=16), nullable=True))
    # Rows from before: an attempt with judges was execute -> judge, else execute alone. A live one is at
    # `judge` once its execution is stored, else at `execute` (what the reconciler used to infer).
    attempt = sa.table(
        "attempt",
        sa.column("attempt_id", sa.String),
        sa.column("judges", sa.JSON),
        sa.column("status", sa.String),
        sa.column("pipeline", sa.JSON),
        sa.column("stage", sa.String),
    )
    execution = sa.table("execution", sa.column("attempt_id", sa.String), sa.column("run", sa.Integer))
    bind = op.get_bind()
    executed = {row[0] for row in bind.execute(sa.select(execution.c.attempt_id).where(execution.c.run == 0))}
    values = []
    for attempt_id, judges, status in bind.execute(sa.select(attempt.c.attempt_id, attempt.c.judges, attempt.c.status)):
        stage = None
        if status in ("queued", "running"):
            stage = "judge" if judges and attempt_id in executed else "execute"
        values.append({"aid": attempt_id, "p": ["execute", "judge"] if judges else ["execute"], "s": stage})
    if values:
        bind.execute(
            attempt.update()
            .where(attempt.c.attempt_id == sa.bindparam("aid"))
            .values(pipeline=sa.bindparam("p"), stage=sa.bindparam("s")),
            values,
        )
    if bind.dialect.name != "sqlite":
        # SQLite cannot add NOT NULL to a column without rebuilding the table (see above); the model fills it.
        op.alter_column("attempt", "pipeline", existing_type=sa.JSON(), nullable=False)
    op.create_index("ix_attempt_status_stage", "attempt", ["status", "stage"])


def downgrade() -> None:
    op.drop_index("ix_attempt_status_stage", table_name="attempt")
    op.drop_column("attempt", "stage")
    op.drop_column("attempt", "pipeline")
