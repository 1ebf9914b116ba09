"""``parse_result_file``: bytes of any supported result file → one canonical ``ParsedResult``.

Order of work: gunzip (capped); open the container — a zip or tar of one training job's files
(``results.formats.observed``), Feather/Arrow IPC, Parquet, or text; then walk the formats (``results.formats``) in
their detection order and hand the file to the first that recognises it (or to the one the caller names):
a text format from the content's head, a table format from the columns of the table read from the
container (CSV when the content is text).
"""

from pathlib import Path

import pyarrow as pa

from emuplan.results.budget import DEFAULT_MAX_DECOMPRESSED_BYTES, ImportBudget, ImportLimits
from emuplan.results.canonical import ParsedResult, ResultFileError
from emuplan.results.containers import arrow_ipc, parquet_input
from emuplan.results.containers.gzip_input import GZIP_MAGIC, gunzip_capped
from emuplan.results.formats import BY_NAME, DETECTION_ORDER, FORMATS, Format, format_module, observed, tabular
from emuplan.results.formats.headers import MappedColumn
from emuplan.results.formats.upload import HEAD_BYTES, Upload, content_of, numbers_named

ARROW_FILE_MAGIC = b"ARROW1"
ARROW_STREAM_MAGIC = b"\xff\xff\xff\xff"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _looks_binary(head: bytes) -> bool:
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as error:
        # A multi-byte character cut at the end of the sample is still text.
        return error.start < len(head) - 4
    return False


def parse_result_file(
    source: bytes | memoryview | Path,
    file_name: str,
    fmt: str | None = None,
    column_map: dict[str, str] | None = None,
    *,
    collective: str | None = None,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    budget: ImportBudget | None = None,
) -> ParsedResult:
    """Read any supported result file: its bytes, or the path of a file on disk (an upload spooled there).

    A CSV on disk is parsed straight from the file, a block at a time, so its bytes are never all in
    memory beside the table; the other formats are small and read whole. ``fmt`` forces one of
    ``FORMATS`` instead of detecting it; ``column_map`` maps roles (``duration``, ``size``, ``iteration``,
    ``collective``, ``start``, ``end``, ``src``, ``dst``, ``qp``, ``label``, …) to header names the aliases
    do not know; ``collective`` names the op when the file does not.
    ``budget``: the import's memory account (``results.budget``), which the caller releases; without one,
    the defaults with ``max_decompressed_bytes``, released on return.
    Raises ``ResultFileError`` (400) or ``ResultFileTooLarge`` (413) naming file, row and column, and
    ``ImportsBusy`` (503) when the imports in flight leave no room for this one.
    """
    if budget is None:
        with ImportBudget(ImportLimits(max_decompressed_bytes=max_decompressed_bytes)) as own:
            return parse_result_file(source, file_name, fmt, column_map, collective=collective, budget=own)
    if fmt is not None and fmt not in FORMATS:
        raise ResultFileError(f"{file_name}: unknown format {fmt!r}; formats: {', '.join(FORMATS)}")
    named = BY_NAME[fmt] if fmt is not None else None
    if not _head(source, 1):
        raise ResultFileError(f"{file_name}: the file is empty")
    if _head(source, 2) == GZIP_MAGIC:
        if isinstance(source, Path):
            with source.open("rb") as file:
                source = gunzip_capped(file, file_name, budget)
        else:
            source = gunzip_capped(source, file_name, budget)
        if not source:
            raise ResultFileError(f"{file_name}: the file is empty once decompressed")
    head = _head(source, HEAD_BYTES)
    if observed.is_archive(head) and (fmt is None or fmt in observed.OBSERVED_FORMATS):
        return observed.parse_observed([(file_name, content_of(source))], fmt, budget=budget)
    if head.startswith(ARROW_FILE_MAGIC) or head.startswith(ARROW_STREAM_MAGIC):
        table = arrow_ipc.read_arrow_ipc(source, head, file_name, budget)
        return parse_table(table, file_name, named, column_map, collective, tabular.table_row)
    if head.startswith(parquet_input.MAGIC):
        table = parquet_input.read_parquet(source, file_name, budget)
        return parse_table(table, file_name, named, column_map, collective, tabular.table_row)
    if head.startswith(UTF16_BOMS):
        raise ResultFileError(f"{file_name}: UTF-16 text; save the file as UTF-8 (or plain ASCII) and upload it again")
    if _looks_binary(head):
        raise ResultFileError(
            f"{file_name}: binary content that is not gzip, Feather or Parquet: not a result file this tool reads"
        )
    upload = Upload(source, file_name, head, budget, collective)
    if not upload.text_head.strip():
        raise ResultFileError(f"{file_name}: the file is empty (only whitespace)")
    for entry in DETECTION_ORDER:
        if entry.kind == "text" and (entry == named or (named is None and format_module(entry).recognises(upload))):
            with numbers_named(source, file_name):
                return format_module(entry).parse(upload)
    # The text becomes a table of about its size.
    budget.holds(upload.size, file_name)
    table = tabular.read_csv(source, head, file_name)
    budget.count_rows(table.num_rows, file_name)
    try:
        parsed = parse_table(table, file_name, named, column_map, collective, tabular.csv_line)
    except pa.ArrowInvalid as error:
        if "UTF8" not in str(error):
            raise
        raise ResultFileError(_first_non_utf8(content_of(source), file_name)) from error
    del table
    # Arrow's allocator (mimalloc) keeps freed memory for Arrow's next allocation: here the table as read,
    # now that the samples are built from it (and, for the readers without their own hand-back, the
    # parse's scratch). The statistics allocate through numpy (glibc malloc), which cannot reuse it, so an
    # import's peak held both. Hand it back before they run.
    pa.default_memory_pool().release_unused()
    return parsed


def _head(source: bytes | memoryview | Path, size: int) -> bytes:
    if isinstance(source, Path):
        with source.open("rb") as file:
            return file.read(size)
    return bytes(source[:size])


def _first_non_utf8(data: bytes | memoryview, file_name: str) -> str:
    """Where a CSV stops being UTF-8: line and column, the way the other errors name them."""
    try:
        bytes(data).decode("utf-8")
    except UnicodeDecodeError as error:
        content = bytes(data)
        line_start = content.rfind(b"\n", 0, error.start) + 1
        delimiter = tabular.sniff_delimiter(bytes(data[:4096])).encode()
        header = content.split(b"\n", 1)[0].decode("utf-8", "replace").split(delimiter.decode())
        column_index = content.count(delimiter, line_start, error.start)
        column = header[column_index].strip() if column_index < len(header) else f"#{column_index + 1}"
        line = content.count(b"\n", 0, error.start) + 1
        return (
            f"{file_name}: line {line}, column {column!r}: byte "
            f"0x{content[error.start]:02x} is not UTF-8 (save the file as UTF-8)"
        )
    return f"{file_name}: text that is not UTF-8 (save the file as UTF-8)"


def parse_table(
    table: pa.Table,
    file_name: str,
    named: Format | None,
    column_map: dict[str, str] | None,
    collective: str | None,
    row_name: tabular.RowName,
    first_units: dict[str, str] | None = None,
) -> ParsedResult:
    """A table with a header row (CSV, Feather/Arrow IPC, Parquet; a huge table's blocks,
    ``results.streaming.streamed``) read by its format: ``named``, else the one its columns say (``first_units``:
    ``tabular.Columns``')."""
    columns = tabular.mapped_columns(table, file_name, column_map)
    entry = table_format(columns, table.column_names, file_name, named)
    if table.num_rows == 0:
        raise ResultFileError(f"{file_name}: the header has no data rows under it")
    reader = tabular.Columns(table, columns, file_name, row_name, first_units)
    return format_module(entry).parse(reader, collective, column_map)


def table_format(
    columns: dict[str, MappedColumn], column_names: list[str], file_name: str, named: Format | None
) -> Format:
    """The format of a table whose columns play the roles ``columns`` says (``tabular.mapped_columns``; a
    streamed import has them from its first batch): ``named``, else the first table format in detection order
    that recognises them."""
    entry = named or next(
        (e for e in DETECTION_ORDER if e.kind == "table" and format_module(e).recognises(columns)), None
    )
    if entry is None:
        raise ResultFileError(
            f"{file_name}: unknown format: no completion-time column among {column_names} and not an "
            "nccl-tests log, nccl-tests JSON or ns-3 fct.txt: say which column holds what (the upload form's Column "
            "mapping, --column-map or column_map=, e.g. duration=wall_ms,size=payload_bytes) or pick its Format "
            "(--format, format=)"
        )
    if entry.kind != "table":
        raise ResultFileError(f"{file_name}: format {entry.name!r} is not a table with a header row")
    return entry
