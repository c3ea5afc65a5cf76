"""Revision 0004 gives attempts stored before it their pipeline and stage, as the reconciler used to infer them:
a live attempt with its execution stored waits for its judges; without one, for the executor. Nothing that
refers to an attempt is lost on the way (a SQLite table rebuild with foreign keys on would cascade)."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command

from services.launcher.migrate import alembic_config


def _rows(url: str) -> dict[str, tuple[object, object]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(sa.text("SELECT attempt_id, pipeline, stage FROM attempt")).all()
    finally:
        engine.dispose()
    return {row[0]: (row[1], row[2]) for row in rows}


def test_attempts_from_before_get_their_pipeline_and_stage(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    async_url, sync_url = f"sqlite+aiosqlite:///{path}", f"sqlite:///{path}"
    command.upgrade(alembic_config(async_url), "0003")
    engine = sa.create_engine(sync_url)
    with engine.begin() as connection:
        connection.execute(
            sa.text(
                "INSERT INTO problem (id, tenant, problem_id, title, statement, mode, tests, checker, limits, "
                "\"references\", content_hash, created_at) VALUES (1, 't', 'p', '', 's', 'stdio', '[]', '{}', '{}', "
                "'[]', 'h', '2026-01-01')"
            )
        )
        for attempt_id, judges, status in [
            ("att_waiting", '["j"]', "queued"),
            ("att_executed", '["j"]', "running"),
            ("att_plain", "[]", "running"),
            ("att_done", '["j"]', "done"),
        ]:
            connection.execute(
                sa.text(
                    "INSERT INTO attempt (attempt_id, tenant, problem_pk, language, source_code, source_hash, "
                    "content_hash, judges, repeats, status, created_at) VALUES "
                    "(:a, 't', 1, 'python', 'x', 'h', 'h', :j, 1, :s, '2026-01-01')"
                ),
                {"a": attempt_id, "j": judges, "s": status},
            )
        connection.execute(
            sa.text(
                "INSERT INTO execution (attempt_id, run, verdict, passed, total, compile_output, tests, toolchain, "
                "build_cached, duration_ms, created_at) VALUES "
                "('att_executed', 0, 'AC', 1, 1, '', '[]', '', 0, 1, '2026-01-01')"
            )
        )
        connection.execute(
            sa.text(
                "INSERT INTO judgment (attempt_id, judge, condition, repeat, status, rubric, prompt_version, tries, "
                "updated_at) VALUES ('att_done', 'j', 'blind', 0, 'ok', 'cocreation', 'v1', 1, '2026-01-01')"
            )
        )
    engine.dispose()

    command.upgrade(alembic_config(async_url), "head")

    rows = _rows(sync_url)
    engine = sa.create_engine(sync_url)
    with engine.connect() as connection:
        kept = [
            connection.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar() for table in ("execution", "judgment")
        ]
    engine.dispose()
    assert kept == [1, 1]
    assert rows["att_waiting"] == ('["execute", "judge"]', "execute")
    assert rows["att_executed"] == ('["execute", "judge"]', "judge")
    assert rows["att_plain"] == ('["execute"]', "execute")
    assert rows["att_done"] == ('["execute", "judge"]', None)
