"""Simulation jobs (ASTRA-sim on a plan's Chakra traces) live in the database, as measurement jobs do, so every
worker and instance reports and cancels them; ``result`` holds the finished simulation's document.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "simulation_job",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("plan_id", sa.BigInteger(), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("ranks_done", sa.BigInteger(), nullable=False),
        sa.Column("ranks_total", sa.BigInteger(), nullable=True),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_simulation_job_started_at", "simulation_job", ["started_at"])


def downgrade() -> None:
    op.drop_index("ix_simulation_job_started_at", table_name="simulation_job")
    op.drop_table("simulation_job")
