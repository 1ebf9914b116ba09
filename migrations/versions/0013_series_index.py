"""Indexes for the series of one platform (``store.trend``): its runs newest first, with or without a rank count.

A series page reads the last N runs of a platform (``WHERE platform = ? [AND ranks = ?] ORDER BY id DESC
LIMIT N``). Without an index that reads every run row of the table to find and sort them; with
``(platform, id)`` and ``(platform, ranks, id)`` both databases walk the index backwards from the newest entry
and stop after N, so a series of 10,000 runs costs what one of 10 does. A tag filter is checked per run on
``run_tag``'s primary key while the walk goes on (a tag on most runs of a nightly series stops it early).

Per-run figures are not cached in a column: reading 30 cached summaries and their size sweep costs a few
milliseconds whatever the series' length (bench/bench_trend.py).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_run_platform_id", "run", ["platform", "id"])
    op.create_index("ix_run_platform_ranks_id", "run", ["platform", "ranks", "id"])


def downgrade() -> None:
    op.drop_index("ix_run_platform_ranks_id", table_name="run")
    op.drop_index("ix_run_platform_id", table_name="run")
