"""Relabel jobs: a huge run's statistics computed again (collectives relabelled, plan linked) in the background, in
the database as simulation and measurement jobs are, so every worker reports and cancels them.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "relabel_job",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("bytes_done", sa.BigInteger(), nullable=False),
        sa.Column("bytes_total", sa.BigInteger(), nullable=True),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_relabel_job_run_id", "relabel_job", ["run_id"])
    op.create_index("ix_relabel_job_started_at", "relabel_job", ["started_at"])


def downgrade() -> None:
    op.drop_index("ix_relabel_job_started_at", table_name="relabel_job")
    op.drop_index("ix_relabel_job_run_id", table_name="relabel_job")
    op.drop_table("relabel_job")
