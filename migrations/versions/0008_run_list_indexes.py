"""Indexes for the run lists' filters: ``plan_id`` and the case-folded ``strategy``.

Lists show one page of runs newest first (``ORDER BY id DESC LIMIT/OFFSET``) and count the runs that
match their filters. Without these indexes, a strategy or plan filter read every run row to count and to
page; with them, SQLite and PostgreSQL find the matching ids in the index, already in id order (an index
entry ends with the row's id). The strategy filter compares ``lower(strategy)``, so that is what is
indexed. Tags are a JSON list matched as text inside it: no index serves that, and a tag filter still
reads every run row.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_run_plan_id", "run", ["plan_id"])
    op.create_index("ix_run_strategy_folded", "run", [sa.text("lower(strategy)")])


def downgrade() -> None:
    op.drop_index("ix_run_strategy_folded", table_name="run")
    op.drop_index("ix_run_plan_id", table_name="run")
