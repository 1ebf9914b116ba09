"""On SQLite, an index of the run ids alone (``ix_run_id``): a list's page far from the newest steps over the
skipped runs in it instead of in the run table.

Lists page with ``ORDER BY id DESC LIMIT 50 OFFSET n``. SQLite's run table is a b-tree keyed by the id (the
rowid) with each run's whole row in its leaves, so ``OFFSET 9950`` read through ~600 pages of rows at 10,000
runs (0.75 ms); the index holds (id, rowid) pairs, 26 pages, and SQLite walks it instead (0.20 ms). The
unfiltered count reads it too (SQLite counts through the smallest index). PostgreSQL already walks its
primary key index ``run_pkey`` for this (its table is a heap, not keyed by id): the same index there would
only be a second copy to write, so it is created on SQLite only (the model says so with ``ddl_if``).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def _on_sqlite() -> bool:
    return op.get_context().dialect.name == "sqlite"


def upgrade() -> None:
    if _on_sqlite():
        op.create_index("ix_run_id", "run", ["id"])


def downgrade() -> None:
    if _on_sqlite():
        op.drop_index("ix_run_id", table_name="run")
