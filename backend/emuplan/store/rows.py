"""The lookups every stored kind shares: one row by id or a clear "not found", and a newest-first page."""

from typing import Annotated, TypeVar

from annotated_types import Interval
from sqlmodel import Session, SQLModel, col, select

from emuplan.errors import EmuplanError

Row = TypeVar("Row", bound=SQLModel)
# Ids and offsets are int64 in the database; a larger number in a path, query or body is refused with
# 422 where it is read instead of failing in the database driver (500).
INT64_MAX = 2**63 - 1
DatabaseInt = Annotated[int, Interval(ge=0, le=INT64_MAX)]


class NotFound(EmuplanError, LookupError):
    """No stored row with that id (or token); every store module's not-found error derives from it."""

    http_status = 404


class RunNotFound(NotFound):
    """Here rather than in ``store.runs``: its tables (``store.table_files``) raise it too."""

    def __init__(self, run_id: int):
        super().__init__(f"run {run_id} does not exist")
        self.run_id = run_id


def get_row(session: Session, table: type[Row], row_id: int, not_found: type[NotFound], what: str) -> Row:
    """The row of ``table`` with this id; ``not_found("no {what} with id N")`` when there is none."""
    row = session.get(table, row_id)
    if row is None:
        raise not_found(f"no {what} with id {row_id}")
    return row


Columns = TypeVar("Columns", bound=tuple)  # a NamedTuple whose fields are the table's column names


def newest_columns(
    session: Session, table: type[SQLModel], columns: type[Columns], limit: int, offset: int = 0
) -> list[Columns]:
    """A page of ``table`` by descending id (ids grow with insertion, so newest first), each row only the
    ``columns`` the tuple's fields name: a list never decodes the documents or file contents it does not show
    (a plan's document is tens of kilobytes of JSON, an uploaded ONNX model megabytes)."""
    statement = select(*(getattr(table, name) for name in columns._fields)).order_by(col(table.id).desc())
    return [columns(*row) for row in session.exec(statement.offset(offset).limit(limit))]


def relabel(
    session: Session, row: Row, what: str, *, name: str | None, tags: list[str] | None, note: str | None
) -> Row:
    """Rename, retag or annotate a saved plan or comparison ``row`` (each None: as it is; ``what`` names it in the
    error), in the caller's session (flushed). A run's own fields have their limits (``services.runs.update_run``)."""
    if name is not None:
        if not name.strip():
            raise ValueError(f"name: a {what} needs a name")
        row.name = name.strip()[:200]
    if tags is not None:
        row.tags = sorted({tag.strip() for tag in tags if tag.strip()})
    if note is not None:
        row.note = note.strip()
    session.add(row)
    session.flush()
    return row
