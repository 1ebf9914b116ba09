"""A run's samples as a CSV a spreadsheet can open safely."""

import io

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

# Spreadsheets run a cell starting with one of these as a formula (CSV injection).
_FORMULA_START = r"^[=+\-@\t\r]"


def neutralise_formulas(table: pa.Table) -> pa.Table:
    """Prefix text cells a spreadsheet would run as a formula with a quote."""
    for index, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type) and pa.types.is_string(field.type.value_type):
            # Only the distinct values need checking; the codes stay as they are.
            column = table.column(index).combine_chunks()
            values = column.dictionary
            risky = pc.match_substring_regex(values, _FORMULA_START)
            safe = pc.if_else(risky, pc.binary_join_element_wise("'", values, ""), values)
            table = table.set_column(index, field, pa.DictionaryArray.from_arrays(column.indices, safe))
        elif pa.types.is_string(field.type):
            column = table.column(index)
            risky = pc.match_substring_regex(column, _FORMULA_START)
            table = table.set_column(
                index, field, pc.if_else(risky, pc.binary_join_element_wise("'", column, ""), column)
            )
    return table


def samples_csv_bytes(samples: pa.Table) -> bytes:
    sink = io.BytesIO()
    pacsv.write_csv(neutralise_formulas(samples), sink)
    return sink.getvalue()
