"""``run.verdict``: pass, degraded or fail (``results.verdict``), stored so that lists, ``emuplan runs`` and
``GET /api/runs`` show it without reading any run's statistics.

It is judged whenever what it rests on changes: at import, when the run's platform is set, when its collectives
are relabelled, when its platform profile is edited or deleted. Stored runs are judged here by the same
``results.verdict.judge_summary`` from their stored statistics, their rank count (the linked plan's GPUs first,
as every page reads it) and the platform they name, built-in or stored.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25
"""

import json

import sqlalchemy as sa
from alembic import op

from emuplan.results.verdict import judge_summary
from emuplan.workload.platforms import BUILTIN_PLATFORMS, make_platform

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

DATABASE_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
run = sa.table(
    "run",
    sa.column("id", DATABASE_ID),
    sa.column("plan_id", DATABASE_ID),
    sa.column("kind", sa.String),
    sa.column("ranks", sa.BigInteger),
    sa.column("hosts", sa.BigInteger),
    sa.column("platform", sa.String),
    sa.column("verdict", sa.String),
)
plan = sa.table("plan", sa.column("id", DATABASE_ID), sa.column("inputs", sa.JSON))
run_summary = sa.table("run_summary", sa.column("run_id", DATABASE_ID), sa.column("summary", sa.JSON))


def _json(value):
    return json.loads(value) if isinstance(value, str) else value


def upgrade() -> None:
    op.add_column("run", sa.Column("verdict", sa.String(), nullable=True))
    connection = op.get_bind()
    stored = {}
    for row in connection.execute(sa.text("SELECT * FROM platform")).mappings():
        values = {key: value for key, value in row.items() if key not in ("id", "created_at", "updated_at")}
        values["sources"] = _json(values.get("sources")) or []
        stored[row["name"]] = make_platform(values)
    profiles = {**BUILTIN_PLATFORMS, **stored}
    query = (
        sa.select(run.c.id, run.c.kind, run.c.ranks, run.c.hosts, run.c.platform, plan.c.inputs, run_summary.c.summary)
        .join(run_summary, run_summary.c.run_id == run.c.id)
        .outerjoin(plan, plan.c.id == run.c.plan_id)
    )
    for run_id, kind, ranks, hosts, platform, inputs, summary in connection.execute(query).all():
        summary = _json(summary)
        if not summary.get("groups"):
            continue
        ranks = (_json(inputs) or {}).get("gpus") or ranks
        verdict = judge_summary(summary, kind, ranks=ranks, hosts=hosts, platform=profiles.get(platform))
        connection.execute(run.update().where(run.c.id == run_id).values(verdict=verdict.status))


def downgrade() -> None:
    op.drop_column("run", "verdict")
