"""A database migrated to head has exactly the schema the models declare: Alembic's autogenerate finds
nothing to change, column types included, on SQLite and on PostgreSQL."""

import warnings

import pytest
import sqlalchemy
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData, create_engine
from sqlmodel import SQLModel

import emuplan.store.tables  # noqa: F401 (registers every table in SQLModel.metadata)

pytestmark = pytest.mark.both_databases

# SQLite's reflection cannot read an expression index (lower(strategy), migration 0008), so on SQLite
# autogenerate skips ix_run_strategy_folded with exactly these warnings and compares everything else;
# the index is checked in sqlite_master instead. PostgreSQL reflects it and compares it like the rest.
SQLITE_SKIPS_THE_EXPRESSION_INDEX = {
    "Skipped unsupported reflection of expression-based index ix_run_strategy_folded",
    "autogenerate skipping metadata-specified expression-based index 'ix_run_strategy_folded'; "
    f"dialect 'sqlite' under SQLAlchemy {sqlalchemy.__version__} can't reflect these indexes so they can't be compared",
}
STRATEGY_INDEX_SQL = "CREATE INDEX ix_run_strategy_folded ON run (lower(strategy))"


def models_on(dialect_name: str) -> MetaData:
    """The models' tables as they are on this database: without the indexes they declare for another
    database only (``ddl_if``: ``ix_run_id`` is SQLite's), which Alembic 1.20's autogenerate would expect
    everywhere. Left out of the models, such an index is a difference wherever the database has it."""
    schema = MetaData()
    for table in SQLModel.metadata.sorted_tables:
        copy = table.to_metadata(schema)
        for index in table.indexes:
            condition = index._ddl_if  # where SQLAlchemy keeps ddl_if's rule (it has no public reader)
            if condition is not None and condition.dialect not in (None, dialect_name):
                copy.indexes.remove(next(copied for copied in copy.indexes if copied.name == index.name))
    return schema


def test_a_database_migrated_to_head_differs_in_nothing_from_the_models(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            on_sqlite = connection.dialect.name == "sqlite"
            differences = compare_metadata(context, models_on(connection.dialect.name))
            if on_sqlite:
                index_sql = connection.exec_driver_sql(
                    "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'ix_run_strategy_folded'"
                ).scalar_one()
    finally:
        engine.dispose()
    assert differences == []
    assert {str(warning.message) for warning in caught} == (SQLITE_SKIPS_THE_EXPRESSION_INDEX if on_sqlite else set())
    if on_sqlite:
        assert index_sql == STRATEGY_INDEX_SQL
