"""``run.kind`` (size-sweep | distribution) and ``run.peak_busbw_gbps``: a run is read one way everywhere,
decided once, and the lists show a sweep's peak busbw and a distribution's p50 without reading summaries.

Before this revision every view decided again from the statistics, with a rule (one sample per size, more
than one size) that read a sweep repeated twice as a distribution. Stored runs get the kind and the peak
from their stored statistics by ``results.analysis.run_analysis.run_kind`` and ``peak_busbw``, the rule new imports use.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25
"""

import json

import sqlalchemy as sa
from alembic import op

from emuplan.results.analysis.run_analysis import peak_busbw, run_kind

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# Ids are int64 like every other (see 0005): BIGINT on PostgreSQL, the rowid INTEGER on SQLite.
DATABASE_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

run = sa.table(
    "run", sa.column("id", DATABASE_ID), sa.column("kind", sa.String), sa.column("peak_busbw_gbps", sa.Float)
)
run_summary = sa.table("run_summary", sa.column("run_id", DATABASE_ID), sa.column("summary", sa.JSON))


def upgrade() -> None:
    # SQLite adds a NOT NULL column only with a default; every row gets its own kind below, and PostgreSQL
    # drops the default then (new rows always state their kind).
    op.add_column("run", sa.Column("kind", sa.String(), nullable=False, server_default="distribution"))
    op.add_column("run", sa.Column("peak_busbw_gbps", sa.Float(), nullable=True))
    connection = op.get_bind()
    for run_id, summary in connection.execute(sa.select(run_summary.c.run_id, run_summary.c.summary)).all():
        summary = json.loads(summary) if isinstance(summary, str) else summary
        groups = summary.get("groups", [])
        kind = run_kind(groups)
        peak = peak_busbw(groups)[0] if kind == "size-sweep" else None
        connection.execute(run.update().where(run.c.id == run_id).values(kind=kind, peak_busbw_gbps=peak))
    if connection.dialect.name != "sqlite":
        op.alter_column("run", "kind", server_default=None)


def downgrade() -> None:
    op.drop_column("run", "peak_busbw_gbps")
    op.drop_column("run", "kind")
