"""The one table every result format is read into, and the error every parser raises.

One row is one completed collective (one iteration of one data size), whatever the source:

| column | type | meaning |
|---|---|---|
| ``iteration`` | int64 | trial / iteration number, the order of the delay chart |
| ``collective`` | text | a ``CollectiveOp`` value, or the file's own spelling when it is not one we know |
| ``size_bytes`` | int64, nullable | data size as the file states it (nccl-tests ``size``); null when unknown |
| ``duration_us`` | float64 | completion time in microseconds |
| ``start_us`` | float64, nullable | start time in microseconds when the file has one |
| ``variant`` | text | nccl-tests ``out-of-place`` / ``in-place``; ``""`` otherwise |
| ``label`` | text | free text from the file (a label column, a KAI row name); ``""`` otherwise |
| ``algbw_gbps`` / ``busbw_gbps`` | float64, nullable | bandwidths the file itself reports (nccl-tests, KAI) |
| ``ideal_pct`` | float64, nullable | % of ideal the file itself reports (KAI ``Ideal (%)``) |

Text columns are dictionary-encoded (``TEXT``): a few distinct values repeated over millions of rows,
so grouping works on small integer codes and the Parquet blob stores each value once.

Per-flow uploads also keep their flows (``FLOWS_SCHEMA``), one row per flow/chunk. Files that time every
rank (nccl-tests ``-J`` with ``-I 1`` on several processes, our own measurements) also keep those times
(``RANK_TIMES_SCHEMA``): one row per rank per collective call, the call being the ``sample`` (row of the
samples table) it completed, with the ``rank`` as the file names it, its ``host`` (``""`` when unknown) and
that rank's ``duration_us`` for the call.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from emuplan.errors import EmuplanError
from emuplan.workload.collectives import CollectiveOp, normalise_op_name

TEXT = pa.dictionary(pa.int32(), pa.string())

SAMPLES_SCHEMA = pa.schema(
    [
        pa.field("iteration", pa.int64(), nullable=False),
        pa.field("collective", TEXT, nullable=False),
        pa.field("size_bytes", pa.int64()),
        pa.field("duration_us", pa.float64(), nullable=False),
        pa.field("start_us", pa.float64()),
        pa.field("variant", TEXT, nullable=False),
        pa.field("label", TEXT, nullable=False),
        pa.field("algbw_gbps", pa.float64()),
        pa.field("busbw_gbps", pa.float64()),
        pa.field("ideal_pct", pa.float64()),
    ]
)

FLOWS_SCHEMA = pa.schema(
    [
        pa.field("iteration", pa.int64(), nullable=False),
        pa.field("src", TEXT, nullable=False),
        pa.field("dst", TEXT, nullable=False),
        pa.field("qp", pa.int64()),
        pa.field("size_bytes", pa.int64()),
        pa.field("start_us", pa.float64()),
        pa.field("fct_us", pa.float64(), nullable=False),
    ]
)

RANK_TIMES_SCHEMA = pa.schema(
    [
        pa.field("sample", pa.int64(), nullable=False),
        pa.field("rank", TEXT, nullable=False),
        pa.field("host", TEXT, nullable=False),
        pa.field("duration_us", pa.float64(), nullable=False),
    ]
)

# Integer columns are int64: a whole number from a file must stay below this to be stored as written.
INT64_LIMIT = 2.0**63

# Every time, once converted to µs, lies between these (or is 0): no collective takes less than a
# femtosecond, so size / time stays finite for any int64 size; none takes a century. Outside them a
# value is a unit mistake, and letting it through gave infinite means and bandwidths.
SHORTEST_TIME_US = 1e-9
LONGEST_TIME_US = 100 * 365.25 * 86400 * 1e6


def times_problem(values_us: np.ndarray, *, durations: bool = True) -> tuple[int, str] | None:
    """(first bad position, what is wrong) for times in µs, or None when every one is usable.

    Durations must lie within the bounds above; start and end stamps (which may count from the epoch)
    only have to be finite and not negative."""
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(values_us) | (values_us < 0)
        if durations:
            bad |= (values_us > LONGEST_TIME_US) | ((values_us > 0) & (values_us < SHORTEST_TIME_US))
    if not bad.any():
        return None
    index = int(np.flatnonzero(bad)[0])
    value = float(values_us[index])
    if np.isnan(value):
        return index, "not a number (NaN)"
    if value < 0:
        return index, "negative"
    if np.isinf(value):
        return index, "infinite"
    if value > LONGEST_TIME_US:
        return index, "longer than a century (check the unit)"
    return index, "shorter than a femtosecond but not 0 (check the unit)"


class ResultFileError(EmuplanError, ValueError):
    """A result file that cannot be read; the message names the file and, where it applies, row and column."""

    http_status = 400


class ResultFileTooLarge(ResultFileError):
    """A compressed upload whose content passes the decompressed-size cap (a gzip bomb, or just too big)."""

    http_status = 413


@dataclass
class ParsedResult:
    """What a parser read from one file: samples in the canonical schema, plus what the file says about the set-up."""

    samples: pa.Table
    source_format: str
    ranks: int | None = None
    hosts: int | None = None
    warnings: list[str] = field(default_factory=list)
    flows: pa.Table | None = None
    # nccl-tests' own "# Avg bus bandwidth" line per collective (GB/s), as printed.
    reported_avg_busbw: dict[str, float] = field(default_factory=dict)
    # nccl-tests' count (elements) and type columns per (collective, size).
    elements: dict[tuple[str, int], tuple[int, str]] = field(default_factory=dict)
    # nccl-tests' time, algbw and busbw cells as printed, per (collective, size, variant) timed once: the
    # pages and the CLI show these texts (wording.as_printed).
    printed: dict[tuple[str, int, str], dict[str, str]] = field(default_factory=dict)
    # nccl-tests' #wrong column (elements that failed the check) per (collective, size, variant); absent
    # where the log has no such column (pre-2.13 logs print a max 'error' instead).
    wrong: dict[tuple[str, int, str], int] = field(default_factory=dict)
    # Every rank's time per call (``RANK_TIMES_SCHEMA``) when the file has them.
    rank_times: pa.Table | None = None
    # What one row of ``rank_times`` is ("rank"; "process" for nccl-tests: one MPI process, its GPUs' max)
    # and what its time measures, as the run page says it.
    rank_unit: str = "rank"
    rank_basis: str = ""
    # What a training job sent (NCCL Inspector, PyTorch profiler: ``results.formats.observed``), kept in the summary.
    observed: dict | None = None


def _column(value, arrow_type: pa.DataType, rows: int) -> pa.Array:
    """One column of ``rows`` values: text → ``TEXT``; arrays and numpy → cast to the type."""
    if arrow_type == TEXT:
        return text_column(value, rows)
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    return (value if isinstance(value, pa.Array) else pa.array(value)).cast(arrow_type)


def _table(schema: pa.Schema, rows: int, values: dict) -> pa.Table:
    # Columns without values share one all-null array per type: each ``pa.nulls`` allocates its full width
    # (three float64 columns of 10M rows: 240 MB of zeros).
    nulls = {f.type: pa.nulls(rows, f.type) for f in schema if values[f.name] is None}
    columns = [nulls[f.type] if values[f.name] is None else _column(values[f.name], f.type, rows) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def samples_table(
    *,
    duration_us: np.ndarray,
    collective: pa.Array | str,
    iteration: np.ndarray | None = None,
    size_bytes: pa.Array | np.ndarray | None = None,
    start_us: pa.Array | np.ndarray | None = None,
    variant: pa.Array | str = "",
    label: pa.Array | str = "",
    algbw_gbps: pa.Array | np.ndarray | None = None,
    busbw_gbps: pa.Array | np.ndarray | None = None,
    ideal_pct: pa.Array | np.ndarray | None = None,
) -> pa.Table:
    """Assemble a canonical samples table; scalars are broadcast, missing optional columns become nulls."""
    rows = len(duration_us)
    values = dict(locals())
    values["duration_us"] = np.asarray(duration_us, dtype=np.float64)
    values["iteration"] = np.arange(rows, dtype=np.int64) if iteration is None else iteration
    return _table(SAMPLES_SCHEMA, rows, values)


def flows_table(
    *,
    fct_us: np.ndarray,
    src: pa.Array,
    dst: pa.Array,
    iteration: np.ndarray | None = None,
    qp: pa.Array | None = None,
    size_bytes: pa.Array | None = None,
    start_us: pa.Array | np.ndarray | None = None,
) -> pa.Table:
    """Assemble a flows table (``FLOWS_SCHEMA``); without iterations all flows belong to iteration 0."""
    rows = len(fct_us)
    values = dict(locals())
    values["iteration"] = np.zeros(rows, dtype=np.int64) if iteration is None else iteration
    return _table(FLOWS_SCHEMA, rows, values)


def rank_times_table(*, duration_us: np.ndarray, sample: np.ndarray, rank: pa.Array, host: pa.Array | str) -> pa.Table:
    """Assemble a per-rank times table (``RANK_TIMES_SCHEMA``); scalars are broadcast."""
    rows = len(duration_us)
    values = dict(locals())
    values["duration_us"] = np.asarray(duration_us, dtype=np.float64)
    return _table(RANK_TIMES_SCHEMA, rows, values)


def text_column(value: pa.Array | pa.ChunkedArray | str, rows: int) -> pa.DictionaryArray:
    """A ``TEXT`` column: a scalar repeated ``rows`` times, or any string/dictionary array (nulls → "")."""
    if isinstance(value, str):
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype=np.int32)), pa.array([value]))
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()  # unifies the chunks' dictionaries
    if pa.types.is_dictionary(value.type) and value.null_count == 0:
        return value.cast(TEXT)
    return value.cast(pa.string()).fill_null("").dictionary_encode()


def renamed_text(column: pa.DictionaryArray, rename: Callable[[str], str]) -> pa.DictionaryArray:
    """A ``TEXT`` column with every value renamed; values renamed alike share one code (one group)."""
    names = [rename(name) for name in column.dictionary.to_pylist()]
    distinct = list(dict.fromkeys(names))
    remap = np.array([distinct.index(name) for name in names], dtype=np.int32)
    indices = remap[column.indices.to_numpy(zero_copy_only=False)]
    return pa.DictionaryArray.from_arrays(pa.array(indices), pa.array(distinct, pa.string()))


# Words KCCB/KAI put around the collective in algorithm names (ALGO_ALL_REDUCE_BIDIRECTIONAL_RING, …).
_ALGORITHM_WORDS = ("algo", "unidirectional", "bidirectional", "doublebinarytree", "vectorhalvingdoubling",
                    "halvingdoubling", "ring", "tree", "parallel")  # fmt: skip


def collective_of(name: str) -> str:
    """A ``CollectiveOp`` value for the spellings files use ('AllReduce', 'Ring all-reduce',
    'ALGO_ALL_GATHER_RING'); anything else is kept as written (trimmed)."""
    op = normalise_op_name(name)
    if op is None:
        folded = "".join(ch for ch in name.lower() if ch.isalnum())
        for word in _ALGORITHM_WORDS:
            folded = folded.replace(word, "")
        op = normalise_op_name(folded)
    return op.value if op is not None else name.strip()


def collective_from_file_name(file_name: str) -> str | None:
    """The collective one or two words of a file name spell: 'dp_allreduce_run3.csv', 'all-gather.log'. A
    collective's own name wins over the point-to-point words ('p2p', 'send'), which names often use for the
    transport: 'rtx4090-p2p-disabled-allreduce.txt' is an all-reduce."""
    stem = file_name.rsplit("/", 1)[-1].lower()
    words = "".join(ch if ch.isalnum() else " " for ch in stem).split()
    found = [
        op
        for width in (2, 1)
        for start in range(len(words) - width + 1)
        if (op := normalise_op_name("".join(words[start : start + width]))) is not None
    ]
    chosen = next((op for op in found if op is not CollectiveOp.SEND_RECV), found[0] if found else None)
    return None if chosen is None else chosen.value
