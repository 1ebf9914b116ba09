"""Every id, every column holding one and every count is int64 on PostgreSQL, as on SQLite.

The API accepts ids up to 2^63 − 1 (``api.deps.DatabaseInt``). SQLite's INTEGER holds them; PostgreSQL's
is int32, so ``GET /api/runs/9223372036854775806`` failed there with "integer out of range" (500)
instead of 404, and a sequence would have stopped at 2^31 − 1. SQLite is left as it is: its INTEGER is
int64 already, and an ``INTEGER PRIMARY KEY`` must keep that exact type to stay the rowid.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

INTEGER_COLUMNS = {
    "model_definition": ("id",),
    "plan": ("id", "model_definition_id", "trials"),
    "run": ("id", "plan_id", "sample_count", "ranks", "hosts"),
    "run_table": ("run_id",),
    "run_curves": ("run_id",),
    "comparison": ("id", "baseline_run_id"),
    "share_link": ("id", "comparison_id"),
}


def _retype(old: sa.types.TypeEngine, new: sa.types.TypeEngine, sequence_type: str) -> None:
    dialect = op.get_context().dialect.name
    if dialect == "sqlite":
        return
    for table, columns in INTEGER_COLUMNS.items():
        for column in columns:
            op.alter_column(table, column, type_=new, existing_type=old)
    if dialect == "postgresql":  # a SERIAL's sequence has a type of its own, int32 by default
        for table, columns in INTEGER_COLUMNS.items():
            if "id" in columns:
                op.execute(f"ALTER SEQUENCE {table}_id_seq AS {sequence_type}")


def upgrade() -> None:
    _retype(sa.Integer(), sa.BigInteger(), "bigint")


def downgrade() -> None:
    _retype(sa.BigInteger(), sa.Integer(), "integer")
