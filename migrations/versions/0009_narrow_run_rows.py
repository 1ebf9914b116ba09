"""Narrow ``run`` rows: the statistics move to ``run_summary``, the lists' median and p99 become columns,
and tags get ``run_tag`` with an index for the tag filter.

``run.summary`` (~8 KB of JSON per run) made each SQLite row nearly a page of its own, so a list's
deep page (``OFFSET``) and a tag filter walked megabytes at 10,000 runs: page 200 took 41 ms against
5 ms at 10 runs, a tag filter 69 ms against 5 ms. The statistics now sit in ``run_summary`` (1:1); the
list's overall p50/p99, which it read out of that JSON, are ``run.p50_us`` and ``run.p99_us``; and each
run's tags, case-folded, are rows of ``run_tag``, which the filter looks up through
``ix_run_tag_folded`` (``folded_tag``, ``run_id``) in id order instead of matching text in every row's
JSON. ``run.tags`` keeps the tags as given, for display.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# Ids are int64 like every other (see 0005): BIGINT on PostgreSQL, the rowid INTEGER on SQLite.
DATABASE_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

run = sa.table(
    "run",
    sa.column("id", DATABASE_ID),
    sa.column("tags", sa.JSON),
    sa.column("summary", sa.JSON),
    sa.column("p50_us", sa.Float),
    sa.column("p99_us", sa.Float),
)
run_summary = sa.table("run_summary", sa.column("run_id", DATABASE_ID), sa.column("summary", sa.JSON))
run_tag = sa.table("run_tag", sa.column("run_id", DATABASE_ID), sa.column("folded_tag", sa.String))


def _run_id_column() -> sa.Column:
    return sa.Column("run_id", DATABASE_ID, sa.ForeignKey("run.id", ondelete="CASCADE"), primary_key=True)


def upgrade() -> None:
    op.create_table("run_summary", _run_id_column(), sa.Column("summary", sa.JSON(), nullable=False))
    op.create_table("run_tag", _run_id_column(), sa.Column("folded_tag", sa.String(), primary_key=True))
    op.create_index("ix_run_tag_folded", "run_tag", ["folded_tag", "run_id"])
    op.add_column("run", sa.Column("p50_us", sa.Float(), nullable=True))
    op.add_column("run", sa.Column("p99_us", sa.Float(), nullable=True))
    connection = op.get_bind()
    connection.execute(run_summary.insert().from_select(["run_id", "summary"], sa.select(run.c.id, run.c.summary)))
    overall = {name: run.c.summary[("overall", name)].as_float() for name in ("p50_us", "p99_us")}
    connection.execute(run.update().values(**overall))
    # Folded in Python (str.casefold), as the filter folds what it looks for: SQL's lower() folds ASCII only.
    for run_id, tags in connection.execute(sa.select(run.c.id, run.c.tags)).all():
        tags = json.loads(tags) if isinstance(tags, str) else tags
        for folded in sorted({tag.casefold() for tag in tags}):
            connection.execute(run_tag.insert().values(run_id=run_id, folded_tag=folded))
    op.drop_column("run", "summary")


def downgrade() -> None:
    # SQLite adds a NOT NULL column only with a default; PostgreSQL drops it once the column is filled.
    op.add_column("run", sa.Column("summary", sa.JSON(), nullable=False, server_default=sa.text("'{}'")))
    connection = op.get_bind()
    stored = sa.select(run_summary.c.summary).where(run_summary.c.run_id == run.c.id).scalar_subquery()
    connection.execute(run.update().values(summary=stored))
    if connection.dialect.name != "sqlite":
        op.alter_column("run", "summary", server_default=None)
    op.drop_column("run", "p99_us")
    op.drop_column("run", "p50_us")
    op.drop_index("ix_run_tag_folded", table_name="run_tag")
    op.drop_table("run_tag")
    op.drop_table("run_summary")
