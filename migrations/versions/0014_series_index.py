"""A platform's series (``services.trend``): indexes for its newest runs, and each run's figures beside it.

A series page reads the last N runs of a platform (``WHERE platform = ? [AND ranks = ?] ORDER BY id DESC
LIMIT N``). Without an index that reads every run row of the table to find and sort them; with
``(platform, id)`` and ``(platform, ranks, id)`` both databases walk the index backwards from the newest entry
and stop after N, so a series of 10,000 runs costs what one of 10 does. A tag filter is checked per run on
``run_tag``'s primary key while the walk goes on.

``run_trend_figures`` holds what a series reads of a run (per collective: peak and average busbw, busbw per
size; 0.6 KB of JSON for 31 sizes), written with the run's summary. Reading them from the 56 KB summaries of
30 nccl-tests runs and redoing their size sweeps took 2–3 ms a run (bench/bench_trend.py): a series of 30 cost
three times one of 10. Runs stored before this revision have no row; a series reads theirs from the summary.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# Ids are int64 like every other (see 0005): BIGINT on PostgreSQL, the rowid INTEGER on SQLite.
DATABASE_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_index("ix_run_platform_id", "run", ["platform", "id"])
    op.create_index("ix_run_platform_ranks_id", "run", ["platform", "ranks", "id"])
    op.create_table(
        "run_trend_figures",
        sa.Column("run_id", DATABASE_ID, sa.ForeignKey("run.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("figures", sa.JSON(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("run_trend_figures")
    op.drop_index("ix_run_platform_ranks_id", table_name="run")
    op.drop_index("ix_run_platform_id", table_name="run")
