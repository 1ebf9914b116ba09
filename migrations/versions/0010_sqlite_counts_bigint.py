"""The counts ``plan.trials``, ``run.sample_count``, ``run.ranks`` and ``run.hosts`` are declared BIGINT on
SQLite too, as the models and every other count column (``parameter_count``, ``row_count``) are.

0005 made ids and counts int64 on PostgreSQL and left SQLite alone, because an ``INTEGER PRIMARY KEY``
must keep that exact type to stay the rowid; that holds for the ids only, yet the counts stayed INTEGER
too. SQLite stores INTEGER and BIGINT alike (both integer affinity, up to 8 bytes), so no value changes:
this only makes the declared schema what the models say, which a test compares (autogenerate finds
nothing to change). SQLite cannot change a column's type in place, so ``plan`` and ``run`` are rebuilt
(batch mode copies each table). The rebuild keeps what batch mode cannot carry over by reflection:
AUTOINCREMENT, the ``lower(strategy)`` expression index, and each table's highest id handed out
(``sqlite_sequence``), which the copy would lower to the highest id left after deletions. PostgreSQL
has these columns as BIGINT since 0005: nothing to do there.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

COUNT_COLUMNS = {"plan": ("trials",), "run": ("sample_count", "ranks", "hosts")}

sqlite_sequence = sa.table("sqlite_sequence", sa.column("name", sa.String), sa.column("seq", sa.Integer))


def _retype(old: sa.types.TypeEngine, new: sa.types.TypeEngine) -> None:
    if op.get_context().dialect.name != "sqlite":
        return
    connection = op.get_bind()
    handed_out = dict(connection.execute(sa.select(sqlite_sequence.c.name, sqlite_sequence.c.seq)).all())
    # SQLite cannot reflect an expression index, so the rebuild would drop it without a word.
    op.drop_index("ix_run_strategy_folded", table_name="run")
    for table, columns in COUNT_COLUMNS.items():
        with op.batch_alter_table(table, recreate="always", table_kwargs={"sqlite_autoincrement": True}) as batch:
            for column in columns:
                batch.alter_column(column, type_=new, existing_type=old)
        # The copy leaves the highest id present (no entry at all for an empty table), not the highest given.
        if table in handed_out:
            connection.execute(sqlite_sequence.delete().where(sqlite_sequence.c.name == table))
            connection.execute(sqlite_sequence.insert().values(name=table, seq=handed_out[table]))
    op.create_index("ix_run_strategy_folded", "run", [sa.text("lower(strategy)")])


def upgrade() -> None:
    _retype(sa.Integer(), sa.BigInteger())


def downgrade() -> None:
    _retype(sa.BigInteger(), sa.Integer())
