"""Plans keep the request as the user gave it, so "Edit as a new plan" fills in only what was typed
and leaves the planner's defaults as defaults. Older plans have none (NULL): they are edited from
their filled-in inputs.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("plan") as batch:
        batch.add_column(sa.Column("request", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("plan") as batch:
        batch.drop_column("request")
