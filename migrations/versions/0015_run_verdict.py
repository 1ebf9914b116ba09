"""``run.verdict``: pass, degraded or fail (``results.analysis.verdict``), stored so that lists, ``emuplan runs`` and
``GET /api/runs`` show it without reading any run's statistics.

It is judged whenever what it rests on changes: at import, when the run's platform is set, when its collectives
are relabelled, when its platform profile is edited or deleted. Stored runs are judged here by the same
``results.analysis.verdict.judge_summary`` from their stored statistics (``services.rejudge``).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

from emuplan.services.rejudge import judge_every_run

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("run", sa.Column("verdict", sa.String(), nullable=True))
    judge_every_run(op.get_bind())


def downgrade() -> None:
    op.drop_column("run", "verdict")
