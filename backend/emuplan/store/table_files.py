"""A run's stored table (its Parquet blob in ``run_table``) opened as a file read by ranges, never whole.

Downloads stream from it: the Parquet file as it is, or its batches as CSV (Parquet's reader asks for its
footer, then for the column chunks of one row group at a time). Memory stays what one read asks for,
whatever the run's size; loading the blob first held ~7 bytes a sample per download before a byte left.
SQLite reads the blob incrementally (``sqlite3.Blob``); PostgreSQL reads ``substr`` ranges, which fetch
only the TOAST chunks they cover (Parquet is compressed already, so PostgreSQL stores it uncompressed).
The ranges are read in the caller's session, so a download sees one version of the run throughout.
"""

import io
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pyarrow as pa
from sqlalchemy import func, text
from sqlmodel import Session, select

from emuplan.store.models import RunTable
from emuplan.store.runs import RunNotFound

# What a raw download sends at a time.
PIECE_BYTES = 1 << 20


class _RangeFile(io.RawIOBase):
    """A read-only, seekable file of ``size`` bytes whose ranges ``fetch(offset, length)`` reads."""

    def __init__(self, size: int, fetch: Callable[[int, int], bytes]):
        self.size = size
        self._fetch = fetch
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        start = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self.size}[whence]
        self._position = min(max(start + offset, 0), self.size)
        return self._position

    def readinto(self, buffer) -> int:
        length = min(len(buffer), self.size - self._position)
        if length <= 0:
            return 0
        data = self._fetch(self._position, length)
        buffer[: len(data)] = data
        self._position += len(data)
        return len(data)


@contextmanager
def open_stored_table(session: Session, run_id: int, kind: str = "samples") -> Iterator[pa.NativeFile]:
    """The run's ``kind`` table as a read-only Parquet file; ``RunNotFound`` when it has none."""
    where = (RunTable.run_id == run_id, RunTable.kind == kind)
    connection = session.connection()
    if connection.dialect.name == "sqlite":
        rowid = connection.execute(
            text("SELECT rowid FROM run_table WHERE run_id = :run_id AND kind = :kind"),
            {"run_id": run_id, "kind": kind},
        ).scalar()
        if rowid is None:
            raise RunNotFound(run_id)
        with connection.connection.driver_connection.blobopen("run_table", "parquet", rowid, readonly=True) as blob:

            def read_blob(offset: int, length: int) -> bytes:
                blob.seek(offset)
                return blob.read(length)

            yield pa.PythonFile(_RangeFile(len(blob), read_blob), mode="r")
        return
    size = session.exec(select(func.length(RunTable.parquet)).where(*where)).first()
    if size is None:
        raise RunNotFound(run_id)

    def read_range(offset: int, length: int) -> bytes:
        return session.exec(select(func.substr(RunTable.parquet, offset + 1, length)).where(*where)).one()

    yield pa.PythonFile(_RangeFile(size, read_range), mode="r")


def stored_table_pieces(session: Session, run_id: int, kind: str = "samples") -> Iterator[bytes]:
    """The run's ``kind`` table as its Parquet bytes, ``PIECE_BYTES`` at a time."""
    with open_stored_table(session, run_id, kind) as stored:
        while piece := stored.read(PIECE_BYTES):
            yield piece
