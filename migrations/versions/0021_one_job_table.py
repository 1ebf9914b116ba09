"""One table for every background job (``services/jobs/``): the measurement, simulation and relabel jobs' three
tables become ``job``, whose ``kind`` says which it is, whose ``progress`` holds the kind's counters and whose
``holds`` is what only one active job may hold (a measurement's host, a relabelling's run). Rows keep their ids,
which their URLs carry (``/api/measurements/{id}``, ``/api/simulations/{id}``, ``/api/relabel-jobs/{id}``).

The columns every kind has are copied in SQL; the counters, which become JSON, are copied row by row (a job table
holds a few dozen rows). A relabelling still active here (its worker an older version's, stopped by the upgrade)
holds nothing: it reads as failed once its heartbeat is stale, as before.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

# Each kind's old table and its counters (kept in ``job.progress``).
KINDS = {
    "measurement": ("measurement_job", {"iterations_done": sa.BigInteger, "iterations_total": sa.BigInteger,
                                        "warmup": sa.Boolean}),
    "simulation": ("simulation_job", {"ranks_done": sa.BigInteger, "ranks_total": sa.BigInteger}),
    "relabel": ("relabel_job", {"bytes_done": sa.BigInteger, "bytes_total": sa.BigInteger}),
}  # fmt: skip
SHARED = "id, request, state, error, cancel_requested, heartbeat_at, started_at, finished_at"
MEASUREMENT_HOLDS = "'measurement on ' || running_on"


def _old_table(kind: str) -> sa.TableClause:
    """A kind's old table: its id, its counters, and for a measurement the run it stored."""
    name, counters = KINDS[kind]
    stored = {"run_id": sa.BigInteger} if kind == "measurement" else {}
    return sa.table(name, sa.column("id", sa.String), *(sa.column(c, t) for c, t in {**counters, **stored}.items()))


def _lifetime_columns() -> list[sa.Column]:
    return [
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    ]


def upgrade() -> None:
    op.create_table(
        "job",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("plan_id", sa.BigInteger(), nullable=True),
        sa.Column("run_id", sa.BigInteger(), nullable=True),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("progress", sa.JSON(), nullable=False),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("host", sa.String(), nullable=False),
        sa.Column("holds", sa.String(), nullable=True, unique=True),
        *_lifetime_columns(),
    )
    op.create_index("ix_job_kind", "job", ["kind"])
    op.create_index("ix_job_started_at", "job", ["started_at"])
    op.execute(
        f"INSERT INTO job (kind, plan_id, host, holds, progress, result, {SHARED}) SELECT 'measurement', plan_id, "
        f"host, CASE WHEN running_on IS NULL THEN NULL ELSE {MEASUREMENT_HOLDS} END, '{{}}', NULL, {SHARED} "
        "FROM measurement_job"
    )
    op.execute(
        f"INSERT INTO job (kind, plan_id, host, progress, result, {SHARED}) "
        f"SELECT 'simulation', plan_id, '', '{{}}', result, {SHARED} FROM simulation_job"
    )
    op.execute(
        f"INSERT INTO job (kind, run_id, host, progress, {SHARED}) SELECT 'relabel', run_id, '', '{{}}', {SHARED} "
        "FROM relabel_job"
    )
    bind = op.get_bind()
    job = sa.table("job", sa.column("id", sa.String), sa.column("progress", sa.JSON), sa.column("result", sa.JSON))
    for kind, (_name, counters) in KINDS.items():
        old = _old_table(kind)
        for row in bind.execute(sa.select(old)).mappings():
            values = {"progress": {counter: row[counter] for counter in counters}}
            if kind == "measurement":  # the run a measurement stored is its result
                values["result"] = sa.null() if row["run_id"] is None else {"run_id": row["run_id"]}
            bind.execute(job.update().where(job.c.id == row["id"]).values(**values))
    for name, _counters in KINDS.values():
        op.drop_table(name)


def downgrade() -> None:
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
        *_lifetime_columns(),
    )
    op.create_index("ix_measurement_job_started_at", "measurement_job", ["started_at"])
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
        *_lifetime_columns(),
    )
    op.create_index("ix_simulation_job_started_at", "simulation_job", ["started_at"])
    op.create_table(
        "relabel_job",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("bytes_done", sa.BigInteger(), nullable=False),
        sa.Column("bytes_total", sa.BigInteger(), nullable=True),
        sa.Column("error", sa.String(), nullable=True),
        *_lifetime_columns(),
    )
    op.create_index("ix_relabel_job_run_id", "relabel_job", ["run_id"])
    op.create_index("ix_relabel_job_started_at", "relabel_job", ["started_at"])
    op.execute(
        f"INSERT INTO measurement_job (plan_id, host, running_on, iterations_done, warmup, {SHARED}) SELECT plan_id, "
        f"host, CASE WHEN holds IS NULL THEN NULL ELSE host END, 0, {sa.false().compile(op.get_bind())}, {SHARED} "
        "FROM job WHERE kind = 'measurement'"
    )
    op.execute(
        f"INSERT INTO simulation_job (plan_id, ranks_done, result, {SHARED}) "
        f"SELECT plan_id, 0, result, {SHARED} FROM job WHERE kind = 'simulation'"
    )
    op.execute(
        f"INSERT INTO relabel_job (run_id, bytes_done, {SHARED}) "
        f"SELECT run_id, 0, {SHARED} FROM job WHERE kind = 'relabel'"
    )
    bind = op.get_bind()
    job = sa.table(
        "job", sa.column("id", sa.String), sa.column("kind", sa.String), sa.column("progress", sa.JSON),
        sa.column("result", sa.JSON),
    )  # fmt: skip
    for kind, (_name, counters) in KINDS.items():
        old = _old_table(kind)
        for row in bind.execute(sa.select(job).where(job.c.kind == kind)).mappings():
            values = {counter: row["progress"].get(counter) for counter in counters}
            values = {counter: value for counter, value in values.items() if value is not None}
            if kind == "measurement":
                values["run_id"] = (row["result"] or {}).get("run_id")
            bind.execute(old.update().where(old.c.id == row["id"]).values(**values))
    op.drop_index("ix_job_started_at", table_name="job")
    op.drop_index("ix_job_kind", table_name="job")
    op.drop_table("job")
