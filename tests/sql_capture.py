"""What a piece of store code asks the database: the SELECTs it sends and how the database plans them."""

from sqlalchemy import event

from emuplan.store.db import Database


def sent_queries(database: Database, read) -> list[tuple[str, object]]:
    """The SELECT statements (with their parameters) that ``read(session)`` sends."""
    sent = []

    def record(_connection, _cursor, statement, parameters, _context, _executemany):
        if statement.startswith("SELECT"):
            sent.append((statement, parameters))

    event.listen(database.engine, "before_cursor_execute", record)
    try:
        with database.read_session() as session:
            read(session)
    finally:
        event.remove(database.engine, "before_cursor_execute", record)
    return sent


def query_plan(database: Database, statement: str, parameters, *, forbid_sort: bool = False) -> str:
    """SQLite's plan, or PostgreSQL's with sequential scans (and with ``forbid_sort`` sorts) priced out: the
    tables of a test hold a handful of rows, which PostgreSQL would rather read whole and sort than walk
    an index for. What it still does then, no index can spare it."""
    with database.engine.connect() as connection:
        if database.engine.dialect.name == "sqlite":
            rows = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
            return "\n".join(row[-1] for row in rows)
        connection.exec_driver_sql("SET enable_seqscan = off")
        if forbid_sort:
            connection.exec_driver_sql("SET enable_sort = off")
        return "\n".join(row[0] for row in connection.exec_driver_sql(f"EXPLAIN {statement}", parameters).all())
