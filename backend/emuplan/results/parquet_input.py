"""Parquet files (a run's own ``samples.parquet`` among them), read under an import's budget.

Parquet pages decompress and decode to much more than they store: a column of zeros or of one repeated
string is a few bytes per million rows. The footer says every column chunk's row count, value count and
uncompressed size, so what the table will take is charged to the budget before any page is read (fixed-
width values at their width, text as the dictionary it is read into); the batches read are then checked
against it as they come, so a footer that understates them is refused a batch past it.
"""

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from emuplan.results.budget import ImportBudget
from emuplan.results.canonical import ResultFileError

MAGIC = b"PAR1"
BATCH_ROWS = 65536
# Bytes a value takes once decoded, by physical type; text is read as dictionary indices.
VALUE_BYTES = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8, "BYTE_ARRAY": 4}


def _decoded_bytes(metadata: pq.FileMetaData) -> int:
    total = 0
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for index in range(row_group.num_columns):
            chunk = row_group.column(index)
            width = VALUE_BYTES.get(chunk.physical_type) or metadata.schema.column(index).length or 0
            total += max(chunk.total_uncompressed_size, chunk.num_values * width)
    return total


def read_parquet(source: bytes | memoryview | Path, file_name: str, budget: ImportBudget) -> pa.Table:
    """The table of a Parquet file, its rows and decoded size charged to ``budget`` before it is read
    (``ResultFileTooLarge`` past its caps)."""
    opened = pa.memory_map(str(source)) if isinstance(source, Path) else pa.BufferReader(source)
    try:
        with opened:
            stored = pq.ParquetFile(opened, pre_buffer=False)
            text = [field.name for field in stored.schema_arrow if pa.types.is_string(field.type)]
            stored = pq.ParquetFile(opened, pre_buffer=False, read_dictionary=text)
            budget.count_rows(stored.metadata.num_rows, file_name)
            declared = _decoded_bytes(stored.metadata)
            budget.decompressed(declared, file_name)
            batches, read = [], 0
            for batch in stored.iter_batches(batch_size=BATCH_ROWS, use_threads=False):
                read += batch.nbytes
                if read > declared:
                    budget.decompressed(read - declared, file_name)
                    declared = read
                batches.append(batch)
            return pa.Table.from_batches(batches, schema=stored.schema_arrow)
    except (pa.ArrowInvalid, OSError) as error:
        raise ResultFileError(f"{file_name}: not a readable Parquet file ({error})") from error
