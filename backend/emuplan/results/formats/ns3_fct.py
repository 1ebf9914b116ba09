"""ns-3 (HPCC simulator) ``fct.txt``: one flow a line, no header, a fixed column order. The whole file is one
iteration, rebuilt from its flows as for per-flow tables. A huge one is read a block at a time
(``results.streaming``: ``stream_blocks.FixedColumnBlocks``, as its entry's ``Streaming`` says) with the same reading
options (``csv_options``), conversion (``flows_of``) and naming of a bad line (``refusal``) as here."""

import io
import re
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.csv as pacsv

from emuplan.results.canonical import ParsedResult, ResultFileError, flows_table
from emuplan.results.formats import NS3_FCT
from emuplan.results.formats.tabular import iterations_from_flows
from emuplan.results.formats.upload import Upload

# "sip dip sport dport size start_ns fct_ns standalone_fct_ns", no header.
COLUMN_NAMES = ("sip", "dip", "sport", "dport", "size", "start_ns", "fct_ns", "standalone_fct_ns")
INT64_BOUNDS = (-(2**63), 2**63 - 1)
# What Arrow reads as an int64 (spaces and tabs around it aside): no '+', digits only.
_WHOLE = re.compile(r"-?[0-9]+")
INT64_CHARACTERS = len(str(-(2**63)))


def recognises(upload: Upload) -> bool:
    return recognises_text(upload.text_head)


def recognises_text(head: str) -> bool:
    """Whether the first line of ``head`` (the start of a file's text) has the shape of an fct.txt line."""
    first = head.lstrip().split("\n", 1)[0].split()
    return (
        len(first) == len(COLUMN_NAMES) and all(t.isalnum() for t in first[:2]) and all(t.isdigit() for t in first[2:])
    )


def csv_options(block_bytes: int | None = None) -> dict:
    """``pyarrow.csv``'s options for an fct.txt (``read_csv``'s or ``open_csv``'s, blocks of ``block_bytes``):
    space-delimited, no header, no quoting, every cell present (an empty one is a bad cell, not a null)."""
    read = pacsv.ReadOptions(column_names=list(COLUMN_NAMES))
    if block_bytes is not None:
        read.block_size = block_bytes
    return {
        "read_options": read,
        "parse_options": pacsv.ParseOptions(delimiter=" ", quote_char=False, ignore_empty_lines=True),
        "convert_options": pacsv.ConvertOptions(
            column_types={"sip": pa.string(), "dip": pa.string(), **{c: pa.int64() for c in COLUMN_NAMES[2:]}},
            null_values=[],
            strings_can_be_null=False,
        ),
    }


def flows_of(table: pa.Table) -> pa.Table:
    """The canonical flows (``FLOWS_SCHEMA``, all in iteration 0) of fct.txt lines read with ``csv_options``."""
    return flows_table(
        fct_us=table["fct_ns"].to_numpy() / 1e3,
        src=table["sip"],
        dst=table["dip"],
        size_bytes=table["size"],
        start_us=table["start_ns"].to_numpy() / 1e3,
    )


def one_iteration_warning(file_name: str) -> str:
    return f"{file_name}: ns-3 fct.txt has no iterations: the whole file is one iteration"


def refusal(text: Iterable[str], file_name: str, error: pa.ArrowInvalid) -> ResultFileError:
    """Error path only, after Arrow refused the file (``error``): the first line of ``text`` (the file's lines,
    newlines universal) that is not an fct.txt line, named by its number — Arrow's multi-threaded reader does not
    say which line it refused, and its block reader numbers a block's lines from the block's first."""
    for number, line in enumerate(text, start=1):
        line = line.rstrip("\n")
        if not line:
            continue  # Arrow skips empty lines
        cells = line.split(" ")
        if len(cells) != len(COLUMN_NAMES):
            return ResultFileError(
                f"{file_name}: line {number} has {len(cells)} fields; ns-3 fct.txt has {len(COLUMN_NAMES)}"
            )
        for name, cell in zip(COLUMN_NAMES[2:], cells[2:], strict=True):
            whole = cell.strip(" \t")
            # No 64-bit number has more than 20 characters: a longer one is refused before int() reads it (past
            # 4,300 digits Python refuses with its own message).
            if (
                not _WHOLE.fullmatch(whole)
                or len(whole) > INT64_CHARACTERS
                or not INT64_BOUNDS[0] <= int(whole) <= INT64_BOUNDS[1]
            ):
                shown = cell if len(cell) <= INT64_CHARACTERS else cell[:INT64_CHARACTERS] + "…"
                return ResultFileError(
                    f"{file_name}: line {number}, column {name!r}: {shown!r} is not a 64-bit whole number"
                )
    return ResultFileError(f"{file_name}: not an ns-3 fct.txt ({str(error).splitlines()[0]})")


def parse(upload: Upload) -> ParsedResult:
    file_name, budget = upload.file_name, upload.budget
    # The table takes about the text's size.
    budget.holds(upload.size, file_name)
    try:
        table = pacsv.read_csv(pa.py_buffer(upload.content()), **csv_options())
    except pa.ArrowInvalid as error:
        text = io.TextIOWrapper(io.BytesIO(upload.content()), encoding="utf-8", errors="replace")
        raise refusal(text, file_name, error) from error
    budget.count_rows(table.num_rows, file_name)
    flows = flows_of(table)
    warnings = [one_iteration_warning(file_name)]
    return ParsedResult(
        samples=iterations_from_flows(flows, upload.collective or "unknown", warnings),
        source_format=NS3_FCT,
        warnings=warnings,
        flows=flows,
    )
