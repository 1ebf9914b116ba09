"""A run's samples as a CSV a spreadsheet can open safely, written a batch at a time from the stored Parquet."""

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

# Spreadsheets run a cell starting with one of these as a formula (CSV injection).
_FORMULA_START = r"^[=+\-@\t\r]"
# Rows per CSV piece: ~1 MB of text. Writing a batch as CSV takes scratch of many times its text (a download's
# peak grew 57 MiB at 16,384 rows a piece, 90 at 65,536, 157 at 262,144), and smaller pieces were no faster.
CSV_BATCH_ROWS = 16384
READ_BYTES = 1 << 20


def neutralise_formulas(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Prefix text cells a spreadsheet would run as a formula with a quote."""
    columns = []
    for field, column in zip(batch.schema, batch.columns, strict=True):
        if pa.types.is_dictionary(field.type) and pa.types.is_string(field.type.value_type):
            # Only the distinct values need checking; the codes stay as they are.
            values = column.dictionary
            risky = pc.match_substring_regex(values, _FORMULA_START)
            safe = pc.if_else(risky, pc.binary_join_element_wise("'", values, ""), values)
            column = pa.DictionaryArray.from_arrays(column.indices, safe)
        elif pa.types.is_string(field.type):
            risky = pc.match_substring_regex(column, _FORMULA_START)
            column = pc.if_else(risky, pc.binary_join_element_wise("'", column, ""), column)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


def samples_csv_pieces(parquet: pa.NativeFile) -> Iterator[bytes]:
    """The samples stored as Parquet in ``parquet``, as CSV text in pieces of ``CSV_BATCH_ROWS`` rows (the
    header first): memory stays a MiB of the file and a piece, whatever the run's size (25 M samples made a
    789 MB CSV held whole, beside the table it was written from)."""
    # Read a column chunk a MiB at a time, as the batches need it: by default the reader fetches every row
    # group's ranges before the first batch, the whole file.
    stored = pq.ParquetFile(parquet, pre_buffer=False, buffer_size=READ_BYTES)
    header = pa.BufferOutputStream()
    pacsv.write_csv(stored.schema_arrow.empty_table(), header)
    yield header.getvalue().to_pybytes()
    no_header = pacsv.WriteOptions(include_header=False)
    # One thread: Arrow's pool keeps what each decoding thread freed (8 M samples: 36-38 MiB, against 65-73).
    for batch in stored.iter_batches(batch_size=CSV_BATCH_ROWS, use_threads=False):
        piece = pa.BufferOutputStream()
        pacsv.write_csv(neutralise_formulas(batch), piece, write_options=no_header)
        yield piece.getvalue().to_pybytes()
