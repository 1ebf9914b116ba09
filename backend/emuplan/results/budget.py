"""What an import may hold in memory: a cap per import, and one pool every import in flight shares.

An import's readers charge its ``ImportBudget`` as they go, before they allocate what they charge:

- bytes a container decompresses (gzip's output a chunk at a time; the buffers of an Arrow IPC/Feather
  file with LZ4/ZSTD body compression, from each batch's metadata before any is decompressed) count
  against ``max_decompressed_bytes`` (EMUPLAN_MAX_DECOMPRESSED_BYTES, 413 past it);
- an archive's members count against ``max_archive_members`` (EMUPLAN_MAX_ARCHIVE_MEMBERS, 413 past it),
  each charged ``ARCHIVE_MEMBER_BYTES`` in the pool before any is read;
- rows count against ``max_rows`` (EMUPLAN_MAX_IMPORT_ROWS, 413 past it): an import builds its samples
  table and statistics per row whatever the file's width, so a 6.6 KB Feather of 25 M zeros cost the
  server 1.9 GB (``ROW_BYTES`` each);
- a PyTorch profiler trace's events count against ``max_trace_events`` (EMUPLAN_MAX_TRACE_EVENTS, 413 past
  it), each trace on its own: its time grows with them;
- other memory the import builds (a CSV's table, about the size of its text; a JSON report's Python
  objects, up to ``JSON_BYTES_PER_BYTE`` times its text) counts only in the pool.

The pool (EMUPLAN_IMPORT_MEMORY_BYTES) is one process-wide counter of what the imports in flight hold:
an import that does not fit beside the others is refused with ``ImportsBusy`` (503 with Retry-After, as a
model upload is when every sandbox slot is taken) instead of taking the server's memory with it; one that
would not fit even alone is too large (413). Nothing waits: a waiting import would hold a server thread.
"""

import threading
from dataclasses import dataclass

from emuplan.errors import EmuplanError
from emuplan.results.canonical import ResultFileTooLarge

DEFAULT_MAX_DECOMPRESSED_BYTES = 2 * 1024**3
DEFAULT_MAX_ROWS = 20_000_000
# A profiler trace is read as Python objects, about 15 µs and 2 KB an event: a million is ~15 s of a core.
DEFAULT_MAX_TRACE_EVENTS = 1_000_000
# Less than two imports at the decompressed cap: two 3 GB gzip bombs at once took the server from 0.24 to
# 4.24 GB without the pool, to 3.28 GB with this one (both turned away with 503 once it was full).
DEFAULT_POOL_BYTES = 3 * 1024**3
# What one row costs an import beyond the bytes it was read from: the samples table, the statistics' sorted
# copies. The audit's 25 M-row Feather took the server from 0.16 to 2.08 GB: 77 bytes a row.
ROW_BYTES = 80
# What Python's objects for a JSON document take at most, per byte of it: an array of empty objects, 25.
JSON_BYTES_PER_BYTE = 26
# The members an archive upload may hold (EMUPLAN_MAX_ARCHIVE_MEMBERS), and what each costs the import beyond its
# bytes (its name, its calls' Python objects until the job is merged): the audit's 1.2 MB tar.gz of 100,000
# one-record files took the server +2.62 GB, ~26 KB a member.
DEFAULT_MAX_ARCHIVE_MEMBERS = 10_000
ARCHIVE_MEMBER_BYTES = 32 * 1024
RETRY_AFTER_S = 10
# A per-iteration or per-flow table (CSV, gzip CSV, Feather, Parquet) larger than this on disk or decompressed is
# imported streamed (``results.streaming.streamed``), in ``DEFAULT_STREAMED_MEMORY_BYTES`` whatever its size: at 4.5 M
# rows (256 MiB of CSV) the in-memory import holds ~0.6 GB.
DEFAULT_STREAMED_ABOVE_BYTES = 256 * 1024**2
# What a streamed import holds at most (DuckDB's sort before it spills, a block of the table being checked, a
# fetched batch): with the server's own ~0.3 GB, its peak stays under 1.5 GB.
DEFAULT_STREAMED_MEMORY_BYTES = 1024**3


class ImportsBusy(EmuplanError, ValueError):
    """The imports in flight hold the pool: try again after ``retry_after_s`` (HTTP 503 with Retry-After)."""

    http_status = 503

    def __init__(self, message: str, retry_after_s: int = RETRY_AFTER_S):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ImportDiskFull(EmuplanError, ValueError):
    """The disk under the temporary directory (TMPDIR) filled while a streamed import spilled to it (HTTP 507,
    Insufficient Storage): the server's space, not the file, is short."""

    http_status = 507


@dataclass(frozen=True)
class ImportLimits:
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    max_rows: int = DEFAULT_MAX_ROWS
    max_trace_events: int = DEFAULT_MAX_TRACE_EVENTS
    pool_bytes: int = DEFAULT_POOL_BYTES
    streamed_above_bytes: int = DEFAULT_STREAMED_ABOVE_BYTES
    streamed_memory_bytes: int = DEFAULT_STREAMED_MEMORY_BYTES
    max_archive_members: int = DEFAULT_MAX_ARCHIVE_MEMBERS

    @classmethod
    def from_settings(cls, settings) -> "ImportLimits":
        return cls(
            max_decompressed_bytes=settings.max_decompressed_bytes,
            max_rows=settings.max_import_rows,
            max_trace_events=settings.max_trace_events,
            pool_bytes=settings.import_memory_bytes,
            streamed_above_bytes=settings.streamed_import_above_bytes,
            streamed_memory_bytes=settings.streamed_import_memory_bytes,
            max_archive_members=settings.max_archive_members,
        )

    def upload_floor(self, declared_bytes: int) -> int:
        """What an upload of ``declared_bytes`` will hold at least: its size, or a streamed import's memory when
        it is large enough to be streamed."""
        return declared_bytes if declared_bytes <= self.streamed_above_bytes else self.streamed_memory_bytes


class _Pool:
    """The bytes every import in flight holds, in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reserved = 0

    def reserve(self, nbytes: int, capacity: int) -> bool:
        with self._lock:
            if self.reserved + nbytes > capacity:
                return False
            self.reserved += nbytes
            return True

    def release(self, nbytes: int) -> None:
        with self._lock:
            self.reserved -= nbytes


POOL = _Pool()


class ImportBudget:
    """One import's account: what it decompressed, its rows and what it holds in all, reserved in ``POOL``
    until ``release`` (a context manager: released on exit, whether the import succeeded or not).

    ``admit(floor)`` reserves what the import will hold at least (the upload's declared size) before its
    body is read, so that a burst is turned away at once; the charges that follow reserve more only once
    they pass it."""

    def __init__(self, limits: ImportLimits = ImportLimits()):
        self.limits = limits
        self.decompressed_bytes = 0
        self.rows = 0
        self.held_bytes = 0
        self._floor = 0
        self._reserved = 0

    def __enter__(self) -> "ImportBudget":
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()

    def admit(self, floor: int, what: str = "this upload") -> None:
        self._floor = max(self._floor, floor)
        self._reserve_up_to(max(self.held_bytes, self._floor), what)

    def decompressed(self, nbytes: int, file_name: str, *, held: bool = True) -> None:
        """``nbytes`` more decompressed content, before it is allocated; 413 past the per-import cap.
        ``held=False``: content a streamed import passes on a block at a time (``results.streaming.streamed``), which
        counts against the cap but not again in the pool (the streamed import's memory is held once)."""
        if self.decompressed_bytes + nbytes > self.limits.max_decompressed_bytes:
            raise ResultFileTooLarge(
                f"{file_name}: decompresses to more than {self.limits.max_decompressed_bytes} bytes "
                "(EMUPLAN_MAX_DECOMPRESSED_BYTES)"
            )
        self.decompressed_bytes += nbytes
        if held:
            self.holds(nbytes, file_name)

    def count_rows(self, rows: int, file_name: str) -> None:
        """``rows`` more rows, before the import builds anything from them; 413 past the per-import cap."""
        if self.rows + rows > self.limits.max_rows:
            raise ResultFileTooLarge(
                f"{file_name}: more than {self.limits.max_rows} rows (EMUPLAN_MAX_IMPORT_ROWS); an import holds "
                f"about {ROW_BYTES} bytes a row"
            )
        self.rows += rows
        self.holds(rows * ROW_BYTES, file_name)

    def count_members(self, count: int, file_name: str) -> None:
        """An archive of ``count`` members, before any is read; 413 past the per-import cap."""
        if count > self.limits.max_archive_members:
            raise ResultFileTooLarge(
                f"{file_name}: more than {self.limits.max_archive_members} members (EMUPLAN_MAX_ARCHIVE_MEMBERS)"
            )
        self.holds(count * ARCHIVE_MEMBER_BYTES, file_name)

    def holds(self, nbytes: int, file_name: str) -> None:
        """``nbytes`` more memory the import builds, reserved in the pool."""
        self.held_bytes += nbytes
        self._reserve_up_to(max(self.held_bytes, self._floor), file_name)

    def _reserve_up_to(self, total: int, what: str) -> None:
        more = total - self._reserved
        if more <= 0:
            return
        capacity = self.limits.pool_bytes
        if total > capacity:
            raise ResultFileTooLarge(
                f"{what}: importing it takes more than the {capacity} bytes of memory all imports share "
                "(EMUPLAN_IMPORT_MEMORY_BYTES)"
            )
        if not POOL.reserve(more, capacity):
            raise ImportsBusy(
                f"{what}: the imports in progress hold the {capacity} bytes of memory all imports share "
                f"(EMUPLAN_IMPORT_MEMORY_BYTES); try again in {RETRY_AFTER_S} s"
            )
        self._reserved = total

    def release(self) -> None:
        POOL.release(self._reserved)
        self._reserved = 0
