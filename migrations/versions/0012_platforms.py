"""Platform profiles users add (``platform``), and the platform a run or a plan names (``run.platform``,
``plan.platform``).

The built-in profiles live in the code (``workload.platforms.BUILTIN_PLATFORMS``) and are never stored; a name
is unique across both. A run or a plan names its platform by that name, not by ``platform.id``: a foreign key
could not point at a built-in, and the name is what the CLI, the URLs and the series of one platform use.
Renaming a stored profile renames its references in the same transaction; deleting it leaves its runs and
plans with no platform (``store.platforms``).

``run.platform`` has no index of its own yet: on SQLite a count of all runs would walk it instead of ``ix_run_id``
(0011), and which index a series of one platform wants (with its time? its tag?) is for the query that reads it.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# Ids never reused on SQLite (see 0003); PostgreSQL sequences already never go back.
NEVER_REUSE_IDS = {"sqlite_autoincrement": True}
# Ids are int64 like every other (see 0005): BIGINT on PostgreSQL, the rowid INTEGER on SQLite.
DATABASE_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _text(name: str) -> sa.Column:
    return sa.Column(name, sa.String(), nullable=False)


def _count(name: str) -> sa.Column:
    return sa.Column(name, sa.Integer(), nullable=False)


def _figure(name: str) -> sa.Column:
    return sa.Column(name, sa.Float(), nullable=False)


def upgrade() -> None:
    op.create_table(
        "platform",
        sa.Column("id", DATABASE_ID, primary_key=True),
        sa.Column("name", sa.String(), nullable=False, unique=True),
        _text("title"),
        _text("gpu_model"),
        _count("gpus_per_node"),
        _count("scale_up_domain_gpus"),
        _text("scale_up_fabric"),
        _figure("scale_up_gb_s"),
        _text("scale_out_fabric"),
        _count("nics_per_node"),
        _figure("nic_gbit_s"),
        _figure("scale_up_alpha_us"),
        _figure("scale_out_alpha_us"),
        _figure("degraded_below_pct"),
        _figure("fail_below_pct"),
        sa.Column("sources", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        **NEVER_REUSE_IDS,
    )
    # Plain ALTER TABLE on both databases (SQLite adds and drops a column in place since 3.35): no batch-mode
    # rebuild of ``run``, which would lose its expression index and highest id handed out (see 0010).
    for table in ("run", "plan"):
        op.add_column(table, sa.Column("platform", sa.String(), nullable=True))


def downgrade() -> None:
    for table in ("plan", "run"):
        op.drop_column(table, "platform")
    op.drop_table("platform")
