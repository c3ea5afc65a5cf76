"""Alembic environment and revisions: the only way Tribunal's schema changes."""
