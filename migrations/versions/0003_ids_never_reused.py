"""Ids are never reused: SQLite AUTOINCREMENT on every table whose id a URL or a comparison holds.

Without it SQLite hands out max(id) + 1, so deleting the newest run and uploading another gave the new
one the old id, and a saved comparison or share link showed a run it was never made with. PostgreSQL's
sequences never go back, so only SQLite tables are rebuilt (Alembic's batch mode copies each table).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TABLES = ("model_definition", "plan", "run", "comparison", "share_link")


def _rebuild(autoincrement: bool) -> None:
    if op.get_context().dialect.name != "sqlite":
        return
    for table in TABLES:
        with op.batch_alter_table(table, recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}):
            pass


def upgrade() -> None:
    _rebuild(autoincrement=True)


def downgrade() -> None:
    _rebuild(autoincrement=False)
