"""Where a streamed import's blocks come from (``results.streaming.streamed`` reads them all in one loop): a CSV or an
ns-3 fct.txt, gzip decompressed as it is read, an Arrow IPC file or stream by record batch, a Parquet file by batch.
Each gives its column names, its blocks of a bounded size, and how the in-memory import names a row (a CSV's line,
a table's row); the containers' caps (``results.budget``) apply as in memory, except that what is decompressed passes on
with its block instead of being held.

Which files are large: a file past ``ImportLimits.streamed_above_bytes`` on disk, or whose content does once
decompressed — a gzip's by its trailer (the last member's size, modulo 4 GiB: a gzip that understates it is
read in memory under its cap, as before), an Arrow IPC file's by its batches' metadata, a Parquet file's by its
footer.
"""

import csv
import io
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pyarrow as pa
import pyarrow.csv as pacsv

from emuplan.results.budget import ImportBudget
from emuplan.results.canonical import ResultFileError
from emuplan.results.containers import arrow_ipc, parquet_input
from emuplan.results.containers.gzip_input import GZIP_MAGIC, compressed_pieces, gunzip_chunks
from emuplan.results.formats import DETECTION_ORDER, Format, format_module, tabular

ARROW_MAGIC = (arrow_ipc.FILE_MAGIC, b"\xff\xff\xff\xff")
# Heads that are no CSV: other containers, UTF-16 text.
NOT_CSV = (*ARROW_MAGIC, parquet_input.MAGIC, GZIP_MAGIC, b"\xff\xfe", b"\xfe\xff")
HEAD_BYTES = 65536
# A record batch is decompressed whole: at most this share of the streamed import's memory.
BATCH_SHARE = 8
_CONVERSION_COLUMN = re.compile(r"In CSV column #(\d+)")


def is_large(path: Path, head: bytes, above_bytes: int) -> bool:
    """Whether the file at ``path`` (``head``: its first bytes) or its content once decompressed is larger than
    ``above_bytes``, and could be a table a streamed import reads."""
    large = path.stat().st_size > above_bytes
    try:
        if head.startswith(GZIP_MAGIC):
            with path.open("rb") as file:
                file.seek(-4, io.SEEK_END)
                declared = int.from_bytes(file.read(4), "little")
            return (large or declared > above_bytes) and _is_csv(_gunzipped_head(head))
        if head.startswith(ARROW_MAGIC):
            return large or sum(size for _, size in arrow_ipc.batch_sizes(path, head, path.name)) > above_bytes
        if head.startswith(parquet_input.MAGIC):
            return large or parquet_input.decoded_bytes(path, path.name) > above_bytes
    except (ResultFileError, OSError):
        return False  # unreadable: the in-memory import names what is wrong
    return large and _is_csv(head)


def _gunzipped_head(head: bytes) -> bytes:
    try:
        return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS).decompress(head, 4096)
    except zlib.error:
        return b""


def _is_csv(head: bytes) -> bool:
    return (
        bool(head)
        and not head.startswith(NOT_CSV)
        and b"\x00" not in head
        and not head.lstrip().startswith((b"{", b"#"))
    )


def blocks_of(
    path: Path, file_name: str, budget: ImportBudget, block_bytes: int, fmt: str | None = None
) -> "CsvBlocks | FixedColumnBlocks | ArrowBlocks | ParquetBlocks | None":
    """The file's block source, None when it is no table (a gzip of anything but a CSV). Text is of a streamed text
    format (``formats.Streaming``: fixed columns, no header) when ``fmt`` names it or, said none, the format
    recognises its start (as the in-memory import tells); a CSV with a header row otherwise."""
    with path.open("rb") as file:
        head = file.read(HEAD_BYTES)
    if head.startswith(ARROW_MAGIC):
        return ArrowBlocks(path, head, file_name, budget, block_bytes)
    if head.startswith(parquet_input.MAGIC):
        return ParquetBlocks(path, file_name, budget, block_bytes)
    gzipped = head.startswith(GZIP_MAGIC)
    text_head = _gunzipped_head(head) if gzipped else head
    if gzipped and not _is_csv(text_head):
        return None
    text_format = _text_format(fmt, text_head.decode("utf-8", errors="replace"))
    if text_format is not None:
        return FixedColumnBlocks(text_format, path, file_name, budget, block_bytes, gzipped)
    return CsvBlocks(path, text_head, file_name, budget, block_bytes, gzipped)


def _text_format(fmt: str | None, text_head: str) -> Format | None:
    """The streamed text format ``fmt`` names, or (none named) the first that recognises ``text_head``."""
    return next(
        (
            entry
            for entry in DETECTION_ORDER
            if entry.kind == "text"
            and entry.streaming is not None
            and (entry.name == fmt if fmt is not None else format_module(entry).recognises_text(text_head))
        ),
        None,
    )


class _TextBlocks:
    """Text read by Arrow's block reader; gzip decompressed as it is read, each chunk charged to the import's
    decompressed cap (once: a second pass charges only what passes the first)."""

    def __init__(self, path: Path, file_name: str, budget: ImportBudget, block_bytes: int, gzipped: bool):
        self.path, self.file_name, self.budget, self.block_bytes, self.gzipped = (
            path, file_name, budget, block_bytes, gzipped,
        )  # fmt: skip
        self.charged_bytes = 0

    def _binary(self) -> io.RawIOBase:
        return _Gunzipped(self) if self.gzipped else self.path.open("rb", buffering=0)

    def _native(self) -> pa.NativeFile:
        if not self.gzipped:
            return pa.OSFile(str(self.path))
        # Buffered: Arrow takes each read as a block, and a chunk of gzip is smaller than one.
        return pa.PythonFile(io.BufferedReader(_Gunzipped(self)), mode="r")

    def _text(self) -> TextIO:
        return io.TextIOWrapper(io.BufferedReader(self._binary()), encoding="utf-8", errors="replace", newline="")

    def charge(self, decompressed_bytes: int) -> None:
        """This pass has decompressed ``decompressed_bytes``: what passes the earlier passes is charged."""
        if decompressed_bytes > self.charged_bytes:
            self.budget.decompressed(decompressed_bytes - self.charged_bytes, self.file_name, held=False)
            self.charged_bytes = decompressed_bytes


class CsvBlocks(_TextBlocks):
    """A CSV with a header row by blocks. A column whose type changes further down is read again from the start
    as the wider type (``widened``)."""

    row_name = staticmethod(tabular.csv_line)

    def __init__(self, path: Path, head: bytes, file_name: str, budget: ImportBudget, block_bytes: int, gzipped: bool):
        super().__init__(path, file_name, budget, block_bytes, gzipped)
        self.delimiter = tabular.sniff_delimiter(head)
        self.column_types: dict[str, pa.DataType] = {}
        with self._text() as text:
            self.names = next(csv.reader(text, delimiter=self.delimiter), [])

    def batches(self) -> Iterator[pa.RecordBatch]:
        bad_rows: list[str] = []

        def on_invalid_row(row) -> str:
            where = f"line {row.number}" if row.number is not None else self._line_with_field_count(row)
            bad_rows.append(
                f"{self.file_name}: {where} has {row.actual_columns} fields where the header has {row.expected_columns}"
            )
            return "error"

        convert = pacsv.ConvertOptions(
            null_values=tabular.CONVERT_OPTIONS.null_values,
            strings_can_be_null=False,
            auto_dict_encode=True,
            column_types=self.column_types,
        )
        try:
            with (
                self._native() as file,
                pacsv.open_csv(
                    file,
                    read_options=pacsv.ReadOptions(block_size=self.block_bytes),
                    parse_options=pacsv.ParseOptions(delimiter=self.delimiter, invalid_row_handler=on_invalid_row),
                    convert_options=convert,
                ) as reader,
            ):
                yield from reader
        except pa.ArrowInvalid as error:
            if bad_rows:
                raise ResultFileError(bad_rows[0]) from error
            raise

    def widened(self, message: str) -> bool:
        """After Arrow's ``message`` about a block: the column it names read one step wider (integer → float64 →
        text); False when it names none (a malformed row) or is text already."""
        found = _CONVERSION_COLUMN.search(message)
        if found is None:
            return False
        name = self.names[int(found.group(1))]
        current = self.column_types.get(name, pa.int64())
        if pa.types.is_string(current):
            return False
        self.column_types[name] = pa.float64() if pa.types.is_integer(current) else pa.string()
        return True

    def _line_with_field_count(self, row) -> str:
        """Error path only: the first line with ``row``'s field count (Arrow's parallel reader does not number
        rows), the file read a line at a time."""
        with self._text() as text:
            for number, fields in enumerate(csv.reader(text, delimiter=self.delimiter), start=1):
                if number > 1 and len(fields) == row.actual_columns:
                    return f"line {number}"
        return "a line"


class FixedColumnBlocks(_TextBlocks):
    """Text of a streamed text format (an ns-3 fct.txt: no header) by blocks, read with its format's options: its
    lines' columns and types are fixed. A bad line is named by its number, as the in-memory import names it (the
    format's ``refusal``)."""

    def __init__(
        self, entry: Format, path: Path, file_name: str, budget: ImportBudget, block_bytes: int, gzipped: bool
    ):
        super().__init__(path, file_name, budget, block_bytes, gzipped)
        self.entry, self.reader = entry, format_module(entry)
        self.names = list(self.reader.COLUMN_NAMES)

    def batches(self) -> Iterator[pa.RecordBatch]:
        try:
            with self._native() as file, pacsv.open_csv(file, **self.reader.csv_options(self.block_bytes)) as reader:
                yield from reader
        except pa.ArrowInvalid as error:
            with io.TextIOWrapper(io.BufferedReader(self._binary()), encoding="utf-8", errors="replace") as text:
                raise self.reader.refusal(text, self.file_name, error) from error

    def widened(self, message: str) -> bool:
        return False  # its columns have their types


class _Gunzipped(io.RawIOBase):
    """A gzip file's content as a file read from the start, each chunk charged to its ``_TextBlocks`` as it is
    decompressed."""

    def __init__(self, blocks: _TextBlocks):
        self._compressed = blocks.path.open("rb")
        self._chunks = gunzip_chunks(compressed_pieces(self._compressed), blocks.file_name)
        self._blocks = blocks
        self._pending = memoryview(b"")
        self._position = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._position += len(chunk)
            self._blocks.charge(self._position)
            self._pending = memoryview(chunk)
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size

    def close(self) -> None:
        self._compressed.close()
        super().close()


class ArrowBlocks:
    """An Arrow IPC file or stream by record batch (``arrow_ipc.streamed_batches``: each charged, and one too large
    to decompress within the streamed import's memory refused, before any is decompressed), each cut into
    blocks of about ``block_bytes``."""

    row_name = staticmethod(tabular.table_row)

    def __init__(self, path: Path, head: bytes, file_name: str, budget: ImportBudget, block_bytes: int):
        self.path, self.head, self.file_name, self.budget, self.block_bytes = path, head, file_name, budget, block_bytes
        self.names = arrow_ipc.schema_of(path, head, file_name).names

    def batches(self) -> Iterator[pa.RecordBatch]:
        max_batch_bytes = self.budget.limits.streamed_memory_bytes // BATCH_SHARE
        for batch in arrow_ipc.streamed_batches(self.path, self.head, self.file_name, self.budget, max_batch_bytes):
            rows = max(1, self.block_bytes * batch.num_rows // max(1, batch.nbytes))
            for start in range(0, batch.num_rows, rows):
                yield batch.slice(start, rows)

    def widened(self, message: str) -> bool:
        return False  # its columns have their types


class ParquetBlocks:
    """A Parquet file by batches of about ``block_bytes`` (``parquet_input.streamed_batches``)."""

    row_name = staticmethod(tabular.table_row)

    def __init__(self, path: Path, file_name: str, budget: ImportBudget, block_bytes: int):
        self.path, self.file_name, self.budget, self.block_bytes = path, file_name, budget, block_bytes
        self.names = parquet_input.schema_of(path, file_name).names

    def batches(self) -> Iterator[pa.RecordBatch]:
        return parquet_input.streamed_batches(self.path, self.file_name, self.budget, self.block_bytes)

    def widened(self, message: str) -> bool:
        return False  # its columns have their types
