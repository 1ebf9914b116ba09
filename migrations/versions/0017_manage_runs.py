"""What the runs list shows and filters by, stored on the run row; what people manage on runs, plans,
comparisons and share links.

``run``: ``collectives`` (JSON list, in the order of the run's groups), ``size_min_bytes`` and ``size_max_bytes``
(the range of data sizes), so that the list shows and filters them without reading any run's statistics;
``note`` (free text) and ``facts`` (free-form fabric facts, key → value: topology, NIC, switch, firmware, NCCL
version). ``run_fact`` holds each fact case-folded, as ``run_tag`` holds the tags, for the list's fact filter,
and ``run_collective`` each collective for its collective filter (a filter alone is counted in its index).
The list sorts by name, p50, peak busbw, ranks and largest size through an index each ((column, id): a page of
10,000 runs sorted by p50 reads 50 index entries, not 10,000 rows).

``plan`` and ``comparison`` get ``tags`` and ``note``; ``share_link`` a ``label``.

Stored runs get their collectives and size range from their stored statistics.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-25
"""

import json

import sqlalchemy as sa
from alembic import op

from emuplan.results.analysis.stats import collectives_in

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

DATABASE_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
SORT_INDEXES = {
    "ix_run_name_id": "name",
    "ix_run_p50_id": "p50_us",
    "ix_run_peak_busbw_id": "peak_busbw_gbps",
    "ix_run_ranks_id": "ranks",
    "ix_run_size_max_id": "size_max_bytes",
}
run = sa.table(
    "run",
    sa.column("id", DATABASE_ID),
    sa.column("collectives", sa.JSON),
    sa.column("size_min_bytes", sa.BigInteger),
    sa.column("size_max_bytes", sa.BigInteger),
)
run_collective = sa.table("run_collective", sa.column("run_id", DATABASE_ID), sa.column("collective", sa.String))
run_summary = sa.table("run_summary", sa.column("run_id", DATABASE_ID), sa.column("summary", sa.JSON))


def _text(name: str, table: str) -> None:
    op.add_column(table, sa.Column(name, sa.String(), nullable=False, server_default=""))


def _json(name: str, table: str, empty: str) -> None:
    op.add_column(table, sa.Column(name, sa.JSON(), nullable=False, server_default=sa.text(f"'{empty}'")))


def upgrade() -> None:
    _json("collectives", "run", "[]")
    op.add_column("run", sa.Column("size_min_bytes", sa.BigInteger(), nullable=True))
    op.add_column("run", sa.Column("size_max_bytes", sa.BigInteger(), nullable=True))
    _text("note", "run")
    _json("facts", "run", "{}")
    for table in ("plan", "comparison"):
        _json("tags", table, "[]")
        _text("note", table)
    _text("label", "share_link")
    op.create_table(
        "run_fact",
        sa.Column("run_id", DATABASE_ID, sa.ForeignKey("run.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("folded_key", sa.String(), primary_key=True),
        sa.Column("folded_value", sa.String(), nullable=False),
    )
    op.create_index("ix_run_fact_folded", "run_fact", ["folded_key", "folded_value", "run_id"])
    op.create_table(
        "run_collective",
        sa.Column("run_id", DATABASE_ID, sa.ForeignKey("run.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("collective", sa.String(), primary_key=True),
    )
    op.create_index("ix_run_collective", "run_collective", ["collective", "run_id"])
    for name, column in SORT_INDEXES.items():
        op.create_index(name, "run", [column, "id"])
    connection = op.get_bind()
    for run_id, summary in connection.execute(sa.select(run_summary.c.run_id, run_summary.c.summary)).all():
        summary = json.loads(summary) if isinstance(summary, str) else summary
        sizes = [group["size_bytes"] for group in summary.get("groups", []) if group.get("size_bytes") is not None]
        collectives = collectives_in(summary) if summary.get("groups") else []
        if collectives:
            connection.execute(run_collective.insert(), [{"run_id": run_id, "collective": c} for c in collectives])
        connection.execute(
            run.update()
            .where(run.c.id == run_id)
            .values(
                collectives=collectives,
                size_min_bytes=min(sizes, default=None),
                size_max_bytes=max(sizes, default=None),
            )
        )


def downgrade() -> None:
    for name in SORT_INDEXES:
        op.drop_index(name, table_name="run")
    op.drop_index("ix_run_collective", table_name="run_collective")
    op.drop_table("run_collective")
    op.drop_index("ix_run_fact_folded", table_name="run_fact")
    op.drop_table("run_fact")
    op.drop_column("share_link", "label")
    for table in ("plan", "comparison"):
        op.drop_column(table, "note")
        op.drop_column(table, "tags")
    for column in ("facts", "note", "size_max_bytes", "size_min_bytes", "collectives"):
        op.drop_column("run", column)
