"""A run's ECDF grids and delay series move out of ``run`` into ``run_curves``.

``run.summary`` held them (300–350 KB of JSON per run), so listing runs decoded every run's curves:
100 runs took over a second. ``run.summary`` now keeps the statistics only; ``run_curves.summary``
keeps the whole summary for the figures and comparisons that draw curves.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# The curve keys as this revision found them (a migration keeps its own snapshot of the format).
CURVE_KEYS = ("ecdf", "delay", "overall_ecdf")

run = sa.table("run", sa.column("id", sa.Integer), sa.column("summary", sa.JSON))
run_curves = sa.table("run_curves", sa.column("run_id", sa.Integer), sa.column("summary", sa.JSON))


def _statistics_only(summary: dict) -> dict:
    statistics = {key: value for key, value in summary.items() if key not in CURVE_KEYS}
    if "flows" in statistics:
        statistics["flows"] = {key: value for key, value in statistics["flows"].items() if key != "ecdf"}
    return statistics


def upgrade() -> None:
    op.create_table(
        "run_curves",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("run.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("summary", sa.JSON(), nullable=False),
    )
    connection = op.get_bind()
    for run_id, summary in connection.execute(sa.select(run.c.id, run.c.summary)).all():
        summary = json.loads(summary) if isinstance(summary, str) else summary
        connection.execute(run_curves.insert().values(run_id=run_id, summary=summary))
        connection.execute(run.update().where(run.c.id == run_id).values(summary=_statistics_only(summary)))


def downgrade() -> None:
    connection = op.get_bind()
    for run_id, summary in connection.execute(sa.select(run_curves.c.run_id, run_curves.c.summary)).all():
        connection.execute(run.update().where(run.c.id == run_id).values(summary=summary))
    op.drop_table("run_curves")
