"""Arrow IPC files (Feather V2) and streams, read under an import's budget.

With body compression (LZ4 or ZSTD) a batch's buffers decompress to whatever sizes its metadata declares:
95 KB of zstd held 15 batches of 25 M zero doubles, and reading them took the server to 23 GB. Arrow
decompresses a batch whole when it reads it, so the sizes are taken from the metadata first — each buffer
of a compressed body starts with its decompressed length — and every batch (dictionaries too) is charged
to the budget, rows and bytes, before any is decompressed. The batches charged are the ones the reader
then decodes: those the file's footer lists, or a stream's messages in order.

Arrow keeps about 800 bytes for each batch it has read, whatever its rows: a 105 MB file of 600,000 one-row
batches held 480 MB once read whole. So batches are read one at a time and small ones joined as they come.

The metadata are flatbuffers (Arrow's format/Message.fbs and File.fbs); pyarrow does not expose their
fields, so the few read here are read directly.
"""

import struct
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

from emuplan.results.budget import ImportBudget, ImportsBusy
from emuplan.results.canonical import ResultFileError, ResultFileTooLarge

FILE_MAGIC = b"ARROW1"
# The file's end: the footer's length (int32) and the magic.
FILE_TRAILER_BYTES = 4 + len(FILE_MAGIC)
# Message.header's union type.
DICTIONARY_BATCH = 2
RECORD_BATCH = 3
# Field numbers in their flatbuffer tables.
MESSAGE_HEADER_TYPE, MESSAGE_HEADER = 1, 2
FOOTER_DICTIONARIES, FOOTER_RECORD_BATCHES = 2, 3
DICTIONARY_BATCH_DATA = 1
RECORD_BATCH_LENGTH, RECORD_BATCH_BUFFERS, RECORD_BATCH_COMPRESSION = 0, 2, 3
BLOCK = struct.Struct("<qi4xq")  # offset, metadata length, (padding), body length
BUFFER = struct.Struct("<qq")  # offset, length in the body
# A compressed buffer's decompressed length; -1: stored as it is.
UNCOMPRESSED = -1
# Batches (dictionaries too) a file may have: their metadata are read in Python, ~24 µs each, so at most ~25 s
# for a file. Writers batch by 64 Ki rows or more (100 M rows: 1,526 batches); a 1 GiB file of one-row batches
# holds 6 M.
MAX_BATCHES = 1_000_000
# Small batches are joined into one once this many rows, or this many batches, are waiting.
JOINED_ROWS = 65536
JOINED_BATCHES = 1024


def _field(buffer, table: int, number: int) -> int | None:
    """Where field ``number`` of the flatbuffer table at ``table`` is, None when absent (its default)."""
    vtable = table - struct.unpack_from("<i", buffer, table)[0]
    vtable_bytes = struct.unpack_from("<H", buffer, vtable)[0]
    if 4 + 2 * number >= vtable_bytes:
        return None
    offset = struct.unpack_from("<H", buffer, vtable + 4 + 2 * number)[0]
    return table + offset if offset else None


def _target(buffer, at: int) -> int:
    """The table or vector an offset field at ``at`` points to."""
    return at + struct.unpack_from("<I", buffer, at)[0]


def _vector(buffer, table: int, number: int, item: struct.Struct) -> Iterator[tuple]:
    at = _field(buffer, table, number)
    if at is None:
        return
    vector = _target(buffer, at)
    for index in range(struct.unpack_from("<I", buffer, vector)[0]):
        yield item.unpack_from(buffer, vector + 4 + item.size * index)


def _batch_size(message: ipc.Message) -> tuple[int, int]:
    """(rows of a record batch, bytes its buffers take once decompressed) from its metadata; (0, 0) for the
    schema. A dictionary batch's rows are the dictionary's values, not the table's: they count as bytes only."""
    metadata = message.metadata
    root = _target(metadata, 0)
    kind_at = _field(metadata, root, MESSAGE_HEADER_TYPE)
    kind = metadata[kind_at] if kind_at is not None else 0
    if kind not in (DICTIONARY_BATCH, RECORD_BATCH):
        return 0, 0
    header = _target(metadata, _field(metadata, root, MESSAGE_HEADER))
    if kind == DICTIONARY_BATCH:
        header = _target(metadata, _field(metadata, header, DICTIONARY_BATCH_DATA))
    length_at = _field(metadata, header, RECORD_BATCH_LENGTH)
    rows = struct.unpack_from("<q", metadata, length_at)[0] if length_at is not None else 0
    compressed = _field(metadata, header, RECORD_BATCH_COMPRESSION) is not None
    body = message.body
    size = 0
    for offset, length in _vector(metadata, header, RECORD_BATCH_BUFFERS, BUFFER):
        if compressed and length >= 8:
            declared = struct.unpack_from("<q", body, offset)[0]
            size += length - 8 if declared == UNCOMPRESSED else declared
        else:
            size += length
    if rows < 0 or size < 0:
        raise ValueError("a negative length in a batch's metadata")
    return (rows if kind == RECORD_BATCH else 0), size


def _file_messages(source: pa.NativeFile) -> Iterator[ipc.Message]:
    """The dictionaries and batches an IPC file's footer lists, as ``ipc.open_file`` will read them."""
    size = source.size()
    source.seek(size - FILE_TRAILER_BYTES)
    footer_bytes = struct.unpack("<i", source.read(4))[0]
    if not 0 < footer_bytes <= size - FILE_TRAILER_BYTES:
        raise ValueError("the footer's length is out of the file")
    source.seek(size - FILE_TRAILER_BYTES - footer_bytes)
    footer = source.read(footer_bytes)
    root = _target(footer, 0)
    for number in (FOOTER_DICTIONARIES, FOOTER_RECORD_BATCHES):
        for offset, _, _ in _vector(footer, root, number, BLOCK):
            source.seek(offset)
            yield ipc.read_message(source)


def _stream_messages(source: pa.NativeFile) -> Iterator[ipc.Message]:
    while True:
        try:
            yield ipc.read_message(source)
        except EOFError:
            return


def _opened(source: bytes | memoryview | Path) -> pa.NativeFile:
    return pa.memory_map(str(source)) if isinstance(source, Path) else pa.BufferReader(source)


@contextmanager
def _readable(file_name: str) -> Iterator[None]:
    try:
        yield
    except (ResultFileError, ImportsBusy):
        raise
    except (pa.ArrowInvalid, OSError, ValueError, struct.error, IndexError, TypeError) as error:
        # Metadata that point outside the file, or that Arrow refuses.
        raise ResultFileError(f"{file_name}: not a readable Feather/Arrow file ({error})") from error


def batch_sizes(source: bytes | memoryview | Path, head: bytes, file_name: str) -> Iterator[tuple[int, int]]:
    """(rows, bytes once decompressed) of each dictionary and record batch the reader will decode, from their
    metadata alone (``head``: the file's first bytes)."""
    with _readable(file_name), _opened(source) as opened:
        messages = _file_messages(opened) if head.startswith(FILE_MAGIC) else _stream_messages(opened)
        for count, message in enumerate(messages, 1):
            if count > MAX_BATCHES:
                raise ResultFileTooLarge(f"{file_name}: more than {MAX_BATCHES} batches; write it in larger batches")
            yield _batch_size(message)


def read_arrow_ipc(source: bytes | memoryview | Path, head: bytes, file_name: str, budget: ImportBudget) -> pa.Table:
    """The table of an Arrow IPC file or stream (``head``: its first bytes), once its rows and decompressed
    bytes are charged to ``budget`` (``ResultFileTooLarge`` past its caps, before anything is decompressed)."""
    with _readable(file_name):
        for rows, size in batch_sizes(source, head, file_name):
            budget.count_rows(rows, file_name)
            budget.decompressed(size, file_name)
        with _opened(source) as opened:
            if head.startswith(FILE_MAGIC):
                reader = ipc.open_file(opened)
                batches = (reader.get_batch(index) for index in range(reader.num_record_batches))
            else:
                reader = batches = ipc.open_stream(opened)
            return pa.Table.from_batches(list(_joined_small(batches)), schema=reader.schema)


def _joined_small(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches`` with runs of small ones joined into one batch (``JOINED_ROWS``, ``JOINED_BATCHES``), so that
    what Arrow keeps per batch is held for a thousand at most, not for every one of the file's."""
    waiting: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        waiting.append(batch)
        rows += batch.num_rows
        if rows >= JOINED_ROWS or len(waiting) >= JOINED_BATCHES:
            yield _joined(waiting)
            waiting, rows = [], 0
    if waiting:
        yield _joined(waiting)


def _joined(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    # One batch as it is: Arrow would copy it.
    return batches[0] if len(batches) == 1 else pa.concat_batches(batches)


def schema_of(path: Path, head: bytes, file_name: str) -> pa.Schema:
    with _readable(file_name), pa.OSFile(str(path)) as opened:
        return (ipc.open_file(opened) if head.startswith(FILE_MAGIC) else ipc.open_stream(opened)).schema


def streamed_batches(
    path: Path, head: bytes, file_name: str, budget: ImportBudget, max_batch_bytes: int
) -> Iterator[pa.RecordBatch]:
    """The record batches of a huge Arrow IPC file or stream one at a time (``results.streaming.streamed``): every
    batch's decompressed bytes charged to ``budget``'s cap first (not held: a batch is let go once read), and a batch
    larger than ``max_batch_bytes`` once decompressed refused, before any is decompressed. Read from the file,
    not mapped, so that what was read leaves memory with its batch."""
    with _readable(file_name):
        for _, size in batch_sizes(path, head, file_name):
            if size > max_batch_bytes:
                raise ResultFileTooLarge(
                    f"{file_name}: a record batch decompresses to {size} bytes, more than the {max_batch_bytes} "
                    "a streamed import reads at a time (EMUPLAN_STREAMED_IMPORT_MEMORY_BYTES): write it in "
                    "smaller batches"
                )
            budget.decompressed(size, file_name, held=False)
        with pa.OSFile(str(path)) as opened:
            if head.startswith(FILE_MAGIC):
                reader = ipc.open_file(opened)
                for index in range(reader.num_record_batches):
                    yield reader.get_batch(index)
            else:
                yield from ipc.open_stream(opened)
