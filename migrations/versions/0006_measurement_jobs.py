"""Measurement jobs and their progress live in the database, so every worker and instance reports them.

``running_on`` holds the server host's name while the job is active and NULL once it has finished; its
UNIQUE constraint is the one-measurement-per-host lock (NULLs never collide, on SQLite and PostgreSQL
alike). ``heartbeat_at`` is written by the worker running the job; a stale one means that worker is
gone, and its job is failed so that the host is free again.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "measurement_job",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("plan_id", sa.BigInteger(), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("iterations_done", sa.BigInteger(), nullable=False),
        sa.Column("iterations_total", sa.BigInteger(), nullable=True),
        sa.Column("warmup", sa.Boolean(), nullable=False),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("run_id", sa.BigInteger(), nullable=True),
        sa.Column("host", sa.String(), nullable=False),
        sa.Column("running_on", sa.String(), nullable=True, unique=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_measurement_job_started_at", "measurement_job", ["started_at"])


def downgrade() -> None:
    op.drop_index("ix_measurement_job_started_at", table_name="measurement_job")
    op.drop_table("measurement_job")
