"""The lookups every stored kind shares: one row by id or a clear "not found", and a newest-first page."""

from typing import TypeVar

from sqlmodel import Session, SQLModel, col, select

Row = TypeVar("Row", bound=SQLModel)


class NotFound(LookupError):
    """No stored row with that id (or token); every store module's not-found error derives from it."""


def get_row(session: Session, table: type[Row], row_id: int, not_found: type[NotFound], what: str) -> Row:
    """The row of ``table`` with this id; ``not_found("no {what} with id N")`` when there is none."""
    row = session.get(table, row_id)
    if row is None:
        raise not_found(f"no {what} with id {row_id}")
    return row


def newest_first(session: Session, table: type[Row], limit: int, offset: int = 0) -> list[Row]:
    """A page of ``table`` by descending id (ids grow with insertion, so newest first)."""
    statement = select(table).order_by(col(table.id).desc()).offset(offset).limit(limit)
    return list(session.exec(statement).all())
