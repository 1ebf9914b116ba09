"""The runs list sorts by verdict, platform and collective too, each through an index ((column, id): a sorted
page of 10,000 runs reads its 50 entries, not 10,000 rows).

``run.first_collective``: the first of the run's collectives (in the order of its groups, as the list shows
them), what the list sorts by; stored runs get it from ``run.collectives``. ``ix_run_verdict_id`` serves the
sort by verdict (worst first: each verdict walked apart) and the verdict filter, ``ix_run_first_collective_id``
the sort by collective; by platform the list reads ``ix_run_platform_id`` (0013).

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-26
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

DATABASE_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
run = sa.table(
    "run",
    sa.column("id", DATABASE_ID),
    sa.column("collectives", sa.JSON),
    sa.column("first_collective", sa.String),
)


def upgrade() -> None:
    op.add_column("run", sa.Column("first_collective", sa.String(), nullable=True))
    connection = op.get_bind()
    firsts = []
    for run_id, collectives in connection.execute(sa.select(run.c.id, run.c.collectives)).all():
        collectives = json.loads(collectives) if isinstance(collectives, str) else collectives
        if collectives:
            firsts.append({"run_id": run_id, "first": collectives[0]})
    if firsts:
        connection.execute(
            run.update().where(run.c.id == sa.bindparam("run_id")).values(first_collective=sa.bindparam("first")),
            firsts,
        )
    op.create_index("ix_run_verdict_id", "run", ["verdict", "id"])
    op.create_index("ix_run_first_collective_id", "run", ["first_collective", "id"])


def downgrade() -> None:
    op.drop_index("ix_run_first_collective_id", table_name="run")
    op.drop_index("ix_run_verdict_id", table_name="run")
    op.drop_column("run", "first_collective")
