"""ns-3 (HPCC simulator) ``fct.txt``: one flow a line, no header, a fixed column order. The whole file is one
iteration, rebuilt from its flows as for per-flow tables."""

import pyarrow as pa
import pyarrow.csv as pacsv

from emuplan.results.canonical import ParsedResult, ResultFileError, flows_table
from emuplan.results.formats import NS3_FCT
from emuplan.results.tabular import iterations_from_flows
from emuplan.results.upload import Upload

# "sip dip sport dport size start_ns fct_ns standalone_fct_ns", no header.
NS3_COLUMNS = ("sip", "dip", "sport", "dport", "size", "start_ns", "fct_ns", "standalone_fct_ns")


def recognises(upload: Upload) -> bool:
    first = upload.text_head.lstrip().split("\n", 1)[0].split()
    return (
        len(first) == len(NS3_COLUMNS) and all(t.isalnum() for t in first[:2]) and all(t.isdigit() for t in first[2:])
    )


def parse(upload: Upload) -> ParsedResult:
    file_name, budget = upload.file_name, upload.budget
    # The table takes about the text's size.
    budget.holds(upload.size, file_name)
    bad_rows: list[str] = []

    def on_invalid_row(row) -> str:
        where = f"line {row.number}" if row.number is not None else "a line"
        bad_rows.append(f"{file_name}: {where} has {row.actual_columns} fields; ns-3 fct.txt has {len(NS3_COLUMNS)}")
        return "error"

    try:
        table = pacsv.read_csv(
            pa.py_buffer(upload.content()),
            read_options=pacsv.ReadOptions(column_names=list(NS3_COLUMNS)),
            parse_options=pacsv.ParseOptions(
                delimiter=" ", ignore_empty_lines=True, invalid_row_handler=on_invalid_row
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={"sip": pa.string(), "dip": pa.string(), **{c: pa.int64() for c in NS3_COLUMNS[2:]}}
            ),
        )
    except pa.ArrowInvalid as error:
        raise ResultFileError(bad_rows[0] if bad_rows else f"{file_name}: not an ns-3 fct.txt ({error})") from error
    budget.count_rows(table.num_rows, file_name)
    flows = flows_table(
        fct_us=table["fct_ns"].to_numpy() / 1e3,
        src=table["sip"],
        dst=table["dip"],
        size_bytes=table["size"],
        start_us=table["start_ns"].to_numpy() / 1e3,
    )
    warnings = [f"{file_name}: ns-3 fct.txt has no iterations: the whole file is one iteration"]
    return ParsedResult(
        samples=iterations_from_flows(flows, "unknown", warnings),
        source_format=NS3_FCT,
        warnings=warnings,
        flows=flows,
    )
