"""Alembic environment: the URL is the one the app was configured with, else the app's settings.

An upgrade is one transaction on every database, DDL included (SQLite's too: ``migration_engine``), so a
server killed or failing during an upgrade leaves the database at the revision it started from, and the
next start upgrades it from there.
"""

from alembic import context

from emuplan.settings import get_settings
from emuplan.store.db import migration_engine

config = context.config
url = config.get_main_option("sqlalchemy.url") or get_settings().database_url


def run_migrations_offline() -> None:
    context.configure(url=url, literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = migration_engine(url)
    try:
        with engine.connect() as connection:
            sqlite = connection.dialect.name == "sqlite"
            # Alembic takes SQLite's DDL for non-transactional and would leave each statement to commit alone.
            context.configure(connection=connection, render_as_batch=sqlite, transactional_ddl=True)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
