"""A run's stored table (its Parquet blob in ``run_table``) opened as a file read by ranges, never whole.

Downloads stream from it: the Parquet file as it is, or its batches as CSV (Parquet's reader asks for its
footer, then for the column chunks of one row group at a time). Memory stays what one read asks for,
whatever the run's size; loading the blob first held ~7 bytes a sample per download before a byte left.
SQLite reads the blob incrementally (``sqlite3.Blob``); PostgreSQL reads ``substr`` ranges, which fetch
only the TOAST chunks they cover (Parquet is compressed already, so PostgreSQL stores it uncompressed).
The ranges are read in the caller's session, so a download sees one version of the run throughout.

A huge import's table (``results.streaming.streamed``) is written from its file on disk ``PART_BYTES`` at a time, never
whole in memory, and stored in parts of ``PART_BYTES`` (rows ``kind``, ``kind.part2``, …): SQLite holds at
most 10^9 bytes in a value and PostgreSQL 1 GiB, and 100 M flows take ~1.1 GB of Parquet. The parts read back
as one file.
"""

import io
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pyarrow as pa
from sqlalchemy import delete, func, text
from sqlmodel import Session, col, select

from emuplan.store.rows import RunNotFound
from emuplan.store.tables import RunTable

# What a raw download sends at a time.
PIECE_BYTES = 1 << 20
# The largest part of a stored table.
PART_BYTES = 128 << 20


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


def _joined(parts: list[tuple[int, Callable[[int, int], bytes]]]) -> tuple[int, Callable[[int, int], bytes]]:
    """One file's (size, fetch) from its parts' one after another."""
    if len(parts) == 1:
        return parts[0]
    starts = [0]
    for size, _ in parts:
        starts.append(starts[-1] + size)

    def fetch(offset: int, length: int) -> bytes:
        pieces = []
        for (size, read), start in zip(parts, starts, strict=False):
            low, high = max(offset, start), min(offset + length, start + size)
            if low < high:
                pieces.append(read(low - start, high - low))
        return b"".join(pieces)

    return starts[-1], fetch


def part_kinds(session: Session, run_id: int, kind: str) -> list[str]:
    """The stored rows of the run's ``kind`` table, in order: ``kind`` and its further parts, if any."""
    like = session.exec(
        select(RunTable.kind).where(RunTable.run_id == run_id, col(RunTable.kind).startswith(f"{kind}.part"))
    ).all()
    return [kind, *sorted(like, key=lambda name: int(name.rsplit("part", 1)[1]))]


def drop_stored_table(session: Session, run_id: int, kind: str) -> None:
    """Delete the run's ``kind`` table with all its parts (before it is stored again)."""
    session.exec(
        delete(RunTable).where(RunTable.run_id == run_id, col(RunTable.kind).in_(part_kinds(session, run_id, kind)))
    )


def store_table_file(session: Session, run_id: int, kind: str, path: Path, row_count: int) -> None:
    """Store the Parquet file at ``path`` as the run's ``kind`` table (in parts past ``PART_BYTES``), written a
    ``PIECE_BYTES`` at a time: SQLite's incremental blob into a zeroblob, PostgreSQL a part at a time."""
    size = path.stat().st_size
    connection = session.connection()
    with path.open("rb") as file:
        for number, start in enumerate(range(0, max(size, 1), PART_BYTES), start=1):
            part = kind if number == 1 else f"{kind}.part{number}"
            length = min(PART_BYTES, size - start)
            rows = row_count if number == 1 else 0
            if connection.dialect.name != "sqlite":
                session.add(RunTable(run_id=run_id, kind=part, row_count=rows, parquet=file.read(length)))
                session.flush()
                continue
            connection.execute(
                text(
                    "INSERT INTO run_table (run_id, kind, row_count, parquet) VALUES (:id, :kind, :rows, zeroblob(:n))"
                ),
                {"id": run_id, "kind": part, "rows": rows, "n": length},
            )
            rowid = connection.execute(
                text("SELECT rowid FROM run_table WHERE run_id = :run_id AND kind = :kind"),
                {"run_id": run_id, "kind": part},
            ).scalar()
            with connection.connection.driver_connection.blobopen("run_table", "parquet", rowid) as blob:
                written = 0
                while written < length and (piece := file.read(min(PIECE_BYTES, length - written))):
                    blob.write(piece)
                    written += len(piece)


@contextmanager
def open_stored_table(session: Session, run_id: int, kind: str = "samples") -> Iterator[pa.NativeFile]:
    """The run's ``kind`` table as a read-only Parquet file; ``RunNotFound`` when it has none."""
    connection = session.connection()
    kinds = part_kinds(session, run_id, kind)
    if connection.dialect.name == "sqlite":
        rowids = [
            connection.execute(
                text("SELECT rowid FROM run_table WHERE run_id = :run_id AND kind = :kind"),
                {"run_id": run_id, "kind": part},
            ).scalar()
            for part in kinds
        ]
        if rowids[0] is None:
            raise RunNotFound(run_id)
        driver = connection.connection.driver_connection
        with ExitStack() as stack:
            blobs = [
                stack.enter_context(driver.blobopen("run_table", "parquet", rowid, readonly=True)) for rowid in rowids
            ]

            def reader(blob):
                def read_blob(offset: int, length: int) -> bytes:
                    blob.seek(offset)
                    return blob.read(length)

                return len(blob), read_blob

            yield pa.PythonFile(_RangeFile(*_joined([reader(blob) for blob in blobs])), mode="r")
        return
    parts = []
    for part in kinds:
        where = (RunTable.run_id == run_id, RunTable.kind == part)
        size = session.exec(select(func.length(RunTable.parquet)).where(*where)).first()
        if size is None:
            raise RunNotFound(run_id)

        def read_range(offset: int, length: int, where=where) -> bytes:
            return session.exec(select(func.substr(RunTable.parquet, offset + 1, length)).where(*where)).one()

        parts.append((size, read_range))
    yield pa.PythonFile(_RangeFile(*_joined(parts)), mode="r")


def stored_table_pieces(session: Session, run_id: int, kind: str = "samples") -> Iterator[bytes]:
    """The run's ``kind`` table as its Parquet bytes, ``PIECE_BYTES`` at a time."""
    with open_stored_table(session, run_id, kind) as stored:
        while piece := stored.read(PIECE_BYTES):
            yield piece


class ReadReported:
    """A stored table (``open_stored_table``) read through, ``on_read(size)`` told of each read before it returns:
    a long read's progress, and its end where ``on_read`` raises (a cancelled job)."""

    def __init__(self, stored: pa.NativeFile, on_read: Callable[[int], None]):
        self._stored, self._on_read = stored, on_read

    def read(self, size: int = -1) -> bytes:
        data = self._stored.read(size)
        self._on_read(len(data))
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._stored.seek(offset, whence)

    def tell(self) -> int:
        return self._stored.tell()

    def size(self) -> int:
        return self._stored.size()

    @property
    def closed(self) -> bool:
        return self._stored.closed

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True
