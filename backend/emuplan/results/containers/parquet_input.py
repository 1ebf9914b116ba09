"""Parquet files (a run's own ``samples.parquet`` among them), read under an import's budget.

Parquet pages decompress and decode to much more than they store: a column of zeros or of one repeated
string is a few bytes per million rows. The footer says every column chunk's row count, value count and
uncompressed size, and each page's header its own (``parquet_pages``: Arrow allocates what the header says),
so what the table will take is charged to the budget before any page is read (the larger of the two; fixed-
width values at their width, text as the dictionary it is read into); the batches read are then checked
against it as they come, so figures that understate them are refused a batch past them.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from emuplan.results.budget import ImportBudget, ImportsBusy
from emuplan.results.canonical import ResultFileError, ResultFileTooLarge
from emuplan.results.containers.parquet_pages import MAX_PAGES, TooManyPages, chunk_pages

MAGIC = b"PAR1"
BATCH_ROWS = 65536
# What a streamed read buffers of a column chunk at a time.
STREAM_BUFFER_BYTES = 1 << 20
# Bytes a value takes once decoded, by physical type; text is read as dictionary indices.
VALUE_BYTES = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8, "BYTE_ARRAY": 4}


def _decoded_bytes(metadata: pq.FileMetaData, source: bytes | memoryview | Path) -> int:
    total = pages_seen = 0
    with _raw(source) as raw:
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            for index in range(row_group.num_columns):
                chunk = row_group.column(index)
                width = VALUE_BYTES.get(chunk.physical_type) or metadata.schema.column(index).length or 0
                first_page = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
                pages = chunk_pages(raw, first_page, chunk.total_compressed_size, MAX_PAGES - pages_seen)
                pages_seen += pages.pages
                values = max(chunk.num_values, pages.values)
                total += max(chunk.total_uncompressed_size, pages.uncompressed_bytes, values * width)
    return total


def _raw(source: bytes | memoryview | Path) -> pa.NativeFile:
    return pa.OSFile(str(source)) if isinstance(source, Path) else pa.BufferReader(source)


def _opened(source: bytes | memoryview | Path, *, mapped: bool = True, **options) -> pq.ParquetFile:
    """The file with its text columns read as dictionaries (as a CSV's are); ``mapped=False``: read from the
    file, so that what was read leaves memory with its batch."""
    opened = pa.memory_map(str(source)) if isinstance(source, Path) and mapped else _raw(source)
    stored = pq.ParquetFile(opened, pre_buffer=False, **options)
    text = [field.name for field in stored.schema_arrow if pa.types.is_string(field.type)]
    return pq.ParquetFile(opened, pre_buffer=False, read_dictionary=text, **options)


@contextmanager
def _readable(file_name: str) -> Iterator[None]:
    try:
        yield
    except (ResultFileError, ImportsBusy):
        raise
    except TooManyPages as error:
        raise ResultFileTooLarge(f"{file_name}: more than {MAX_PAGES} pages; write it with larger pages") from error
    except (pa.ArrowInvalid, OSError, ValueError) as error:
        # ValueError: a page header that cannot be read (parquet_pages).
        raise ResultFileError(f"{file_name}: not a readable Parquet file ({error})") from error


def decoded_bytes(path: Path, file_name: str) -> int:
    """What the file's table takes once read, by its footer."""
    with _readable(file_name):
        return _decoded_bytes(_opened(path).metadata, path)


def schema_of(path: Path, file_name: str) -> pa.Schema:
    with _readable(file_name):
        return _opened(path).schema_arrow


def _charged_batches(
    source: bytes | memoryview | Path,
    stored: pq.ParquetFile,
    file_name: str,
    budget: ImportBudget,
    batch_rows: int,
    held: bool,
):
    """The batches, their decoded size charged from the footer and page headers before any page is read, and
    any batch that takes more than they said charged before the next is read."""
    declared = _decoded_bytes(stored.metadata, source)
    budget.decompressed(declared, file_name, held=held)
    read = 0
    for batch in stored.iter_batches(batch_size=batch_rows, use_threads=False):
        read += batch.nbytes
        if read > declared:
            budget.decompressed(read - declared, file_name, held=held)
            declared = read
        yield batch


def read_parquet(source: bytes | memoryview | Path, file_name: str, budget: ImportBudget) -> pa.Table:
    """The table of a Parquet file, its rows and decoded size charged to ``budget`` before it is read
    (``ResultFileTooLarge`` past its caps)."""
    with _readable(file_name):
        stored = _opened(source)
        budget.count_rows(stored.metadata.num_rows, file_name)
        batches = list(_charged_batches(source, stored, file_name, budget, BATCH_ROWS, held=True))
        return pa.Table.from_batches(batches, schema=stored.schema_arrow)


def streamed_batches(path: Path, file_name: str, budget: ImportBudget, batch_bytes: int) -> Iterator[pa.RecordBatch]:
    """The batches of a huge Parquet file one at a time, about ``batch_bytes`` each by the footer's sizes
    (``results.streaming.streamed``): charged to ``budget``'s decompressed cap as in ``read_parquet``, but not held (a
    batch is let go once read); pages read through a buffer instead of a column chunk at a time."""
    with _readable(file_name):
        stored = _opened(path, mapped=False, buffer_size=STREAM_BUFFER_BYTES)
        rows = max(1, stored.metadata.num_rows)
        batch_rows = max(1, min(BATCH_ROWS, batch_bytes * rows // max(1, _decoded_bytes(stored.metadata, path))))
        yield from _charged_batches(path, stored, file_name, budget, batch_rows, held=False)
