"""NCCL Inspector dumps (NCCL's profiler plugin, ``ext-profiler/inspector`` in NVIDIA/nccl; RCCL ships a port), in
either of its output modes.

**JSON** (the default). Each process writes ``<hostname>-pid<pid>.log`` into the dump directory: JSON objects one
after the other, each compact on its own line (``inspectorCommInfoDump``: the object, then a newline), one per
collective the dump thread saw completed, per communicator::

    {"header": {"id": "0x7f8c496ae9f661", "rank": 2, "n_ranks": 8, "nnodes": 1},
     "metadata": {"inspector_output_format_version": "v4.0", "git_rev": "", "rec_mechanism": "...",
                  "dump_timestamp_us": 1748030377748202, "hostname": "node-a", "pid": 1639453},
     "coll_perf": {"coll": "AllReduce", "coll_sn": 1407, "coll_msg_size_bytes": 17179869184,
                   "coll_exec_time_us": 61974, "coll_timing_source": "kernel_gpu",
                   "coll_algobw_gbs": 277.210914, "coll_busbw_gbs": 485.119099,
                   "event_trace_sn": {...}, "event_trace_ts": {"coll_start_ts": ..., ...}}}

(``event_trace_*`` only with ``NCCL_INSPECTOR_DUMP_VERBOSE=1``; ``coll_timing_source`` from format v4.) The dump
thread keeps only the last call each communicator completed between two dumps, so a rank may miss calls that
others recorded. A dump of one object per line is read by Arrow's JSON reader; anything else it refuses (objects
pretty-printed by hand, blank lines, a NaN written as ``"nan"``, a malformed or truncated object) is read object
by object with Python's parser, which names the line of what is wrong.

**Prometheus textfile** (``NCCL_INSPECTOR_PROM_DUMP=1``, for node exporter's textfile collector;
``inspector_prom.cc``). One file per GPU, ``nccl_inspector_metrics_<device UUID>.prom``, truncated and rewritten
at every dump (every 30 s at least). For each communicator on that GPU that completed a call since the last
dump, three samples describe *the last call it completed*, on this rank::

    nccl_algorithm_bandwidth_gbs{comm_id="0xd152c00f111816",hostname="pool0-0002",rank="4",slurm_job="unknown",
        slurm_job_id="unknown",nranks="8",n_nodes="1",gpu_device_id="GPU4",collective="AllReduce",
        coll_sn="228924",timestamp="2025-10-17T03:31:47Z",message_size="2.00GB"} 265.178
    nccl_bus_bandwidth_gbs{...same labels...} 464.061
    nccl_collective_exec_time_microseconds{...same labels...} 8098

So each sample is a gauge of one call's figure, not an aggregate: no ``# TYPE`` line is written (an untyped
sample to Prometheus), the values are printed ``%.6g`` (six significant digits), ``timestamp`` is when the dump
was written, and ``message_size`` is ``coll_msg_size_bytes`` in 1024-based units with two decimals (``512B``,
``1.50KB``, ``2.00GB``): the size read here is that figure, which for sizes that are not a multiple of the unit's
hundredth is rounded, so our busbw agrees with the file's within that rounding as well as the six digits. The
README names the rank count ``n_ranks`` where the source writes ``nranks``; either is read. Samples are joined
into one record by their labels. Several snapshots of one GPU's file read as one file each. The aggregated
output of later Inspectors (labels ``version``, ``comm_name``, a ``message_size`` range such as ``8-9MB``; no
rank or ``coll_sn``) holds no single call and is refused.

NCCL 2.30's Inspector adds ``header.comm_name`` (PyTorch's process-group description), which labels the
communicator here ("default_pg (0x7f8c…)"; the id stays, as communicators may share a name), and writes ``p2p_perf``
records beside ``coll_perf`` by default (``NCCL_INSPECTOR_ENABLE_P2P=1``: one per send or receive, ``p2p``,
``p2p_peer``, ``p2p_msg_size_bytes``, ``p2p_exec_time_us``): those, and the event records of its verbose modes, are
skipped with a warning naming their lines, and the file's collectives are read.

Both modes give the same records. ``coll_msg_size_bytes`` is one rank's buffer; for AllGather and ReduceScatter
the plugin's algbw divides ``n_ranks`` × that by the time (its ``trafficSize``), which is nccl-tests' whole-buffer
size: the size kept here, so that the project's busbw factor applied to it gives the plugin's own busbw (checked
per record). A rank is named by its rank in the largest communicator its process (host and pid; host and GPU in
the Prometheus mode) belongs to in any of the files given (the world, as a rule), so a process is one rank across
its communicators and its snapshots (``named_ranks``).
"""

import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from emuplan.results.budget import ROW_BYTES, ImportBudget
from emuplan.results.canonical import INT64_LIMIT, ParsedResult, ResultFileError, collective_of, renamed_text
from emuplan.results.formats import NCCL_INSPECTOR, observed
from emuplan.results.formats.rank_calls import RANK_CALLS_SCHEMA, FileCalls, OnlyPointToPoint
from emuplan.results.formats.upload import Upload
from emuplan.workload.collectives import PER_RANK_PIECE_OPS, bus_bandwidth_factor, normalise_op_name

_JSON_START = re.compile(rb"^\s*\{\s*\"header\"\s*:")
_PROMETHEUS_START = re.compile(
    rb"^(?:\s*#[^\n]*\n|\s*\n)*\s*nccl_(?:algorithm_bandwidth_gbs|bus_bandwidth_gbs|collective_exec_time_microseconds)"
    rb"\s*\{"
)
_WHITESPACE = re.compile(r"\s*")
# What reading a file line by line or object by object holds beside its bytes, per byte: its text, and a tuple
# per record (the objects are read and dropped one at a time). Python's allocations peaked at 3.1× the bytes of
# one file of bench/inspector_dump.py's 64-rank dump read that way.
TEXT_BYTES_PER_BYTE = 4
# What one record costs an import in all (its columns, the join into calls, the samples and per-rank tables, the
# statistics): the server's RSS rose by 462-506 MB importing bench_observed.py's 1,000,000 records as a zip
# (514-597 MB before the text columns were dictionary-encoded), with room to spare.
RECORD_BYTES = 600
# coll_busbw_gbs is printed with six decimals ("%lf"); the Prometheus samples with six significant digits
# ("%.6g"), time and bandwidth each.
_JSON_TOLERANCE = (5e-7, 1e-9)
_PROMETHEUS_TOLERANCE = (0.0, 1.1e-5)
TIME_METRIC = "nccl_collective_exec_time_microseconds"
_METRICS = {
    "nccl_algorithm_bandwidth_gbs": "algbw",
    "nccl_bus_bandwidth_gbs": "busbw",
    TIME_METRIC: "time_us",
}
_SIZE_LABEL = re.compile(r"^(?:(\d+)B|(\d+\.\d\d)(KB|MB|GB|TB))$")
_UNITS = {"KB": 1, "MB": 2, "GB": 3, "TB": 4}

# What each record says, as read from either mode; ``size_rounding`` is how far the size may be from the one
# the plugin measured, relative (the Prometheus label's last digit; 0 in the JSON).
RECORDS_SCHEMA = pa.schema(
    [
        pa.field("communicator", pa.string()),
        pa.field("rank", pa.int64()),
        pa.field("n_ranks", pa.int64()),
        pa.field("host", pa.string()),
        pa.field("process", pa.string()),
        pa.field("coll", pa.string()),
        pa.field("sn", pa.int64()),
        pa.field("message", pa.int64()),
        pa.field("time_us", pa.float64()),
        pa.field("start_us", pa.float64()),
        pa.field("algbw", pa.float64()),
        pa.field("busbw", pa.float64()),
        pa.field("size_rounding", pa.float64()),
        pa.field("line", pa.int64()),
    ]
)
# The JSON fields Arrow's reader keeps (the rest is skipped).
_JSON_SCHEMA = pa.schema(
    [
        pa.field(
            "header",
            pa.struct([("id", pa.string()), ("rank", pa.int64()), ("n_ranks", pa.int64()), ("comm_name", pa.string())]),
        ),
        pa.field("metadata", pa.struct([("hostname", pa.string()), ("pid", pa.int64())])),
        pa.field(
            "coll_perf",
            pa.struct(
                [
                    ("coll", pa.string()),
                    ("coll_sn", pa.int64()),
                    ("coll_msg_size_bytes", pa.int64()),
                    ("coll_exec_time_us", pa.float64()),
                    ("coll_algobw_gbs", pa.float64()),
                    ("coll_busbw_gbs", pa.float64()),
                    ("event_trace_ts", pa.struct([("coll_start_ts", pa.float64())])),
                ]
            ),
        ),
        pa.field("p2p_perf", pa.struct([("p2p", pa.string())])),
    ]
)
_JSON_READ = pa_json.ReadOptions(use_threads=True, block_size=1 << 24)
_JSON_PARSE = pa_json.ParseOptions(explicit_schema=_JSON_SCHEMA, unexpected_field_behavior="ignore")


def looks_like(head: bytes) -> bool:
    return bool(_JSON_START.match(head) or _PROMETHEUS_START.match(head))


def recognises(upload: Upload) -> bool:
    return looks_like(upload.head)


def parse(upload: Upload) -> ParsedResult:
    """One process's dump as a run; ``observed`` joins the files of a job (an archive, or several uploads)."""
    return observed.parse_observed([(upload.file_name, upload.content())], NCCL_INSPECTOR, budget=upload.budget)


def file_calls(content: bytes | memoryview, file_name: str, budget: ImportBudget) -> FileCalls:
    """The calls of one process's JSON dump, or of one GPU's Prometheus file; a malformed or truncated record is
    refused with its line. Read object by object, a file's text and rows are charged to ``budget`` first; its
    records, once read, either way (``RECORD_BYTES`` each)."""
    data = content if isinstance(content, bytes) else bytes(content)
    prometheus = bool(_PROMETHEUS_START.match(data[:65536]))
    read = None if prometheus else _json_lines(data)
    if read is None:
        budget.holds(len(data) * TEXT_BYTES_PER_BYTE, file_name)
        text = _text(data, file_name)
        read = (_prometheus_records(text, file_name), []) if prometheus else _json_objects(text, file_name)
    records, skipped = read
    if records.num_rows == 0:
        if skipped:
            raise OnlyPointToPoint(
                f"{file_name}: no collective in the file, only {_skipped_kinds(skipped)} (skipped: point-to-point "
                "sends and receives are not collectives of a communicator)"
            )
        raise ResultFileError(f"{file_name}: no Inspector record in the file")
    budget.count_rows(records.num_rows, file_name)
    budget.holds(records.num_rows * (RECORD_BYTES - ROW_BYTES), file_name)
    tolerance = _PROMETHEUS_TOLERANCE if prometheus else _JSON_TOLERANCE
    calls = _calls(records, file_name, tolerance)
    if skipped:
        calls.warnings.append(_skipped_warning(skipped, file_name))
    return calls


# Records of a kind other than coll_perf, as NCCL 2.30's Inspector writes them: p2p_perf (a send or a receive, by
# default: NCCL_INSPECTOR_ENABLE_P2P=1) and, with its verbose options, proxy_op, proxy_ctrl, group, coll_api, p2p_api,
# kernel_launch, net_plugin. A run is the communicators' collectives; point-to-point transfers have no call that every
# rank of a communicator makes, so they are skipped, each named by its line, and the file is read.
P2P_KIND = "p2p_perf"
SHOWN_SKIPPED_LINES = 5


def _skipped_kinds(skipped: list[tuple[int, str]]) -> str:
    kinds: dict[str, int] = {}
    for _, kind in skipped:
        kinds[kind] = kinds.get(kind, 0) + 1
    return ", ".join(f"{count} {kind} record{'s' if count > 1 else ''}" for kind, count in kinds.items())


def _skipped_warning(skipped: list[tuple[int, str]], file_name: str) -> str:
    lines = [line for line, _ in skipped]
    shown = ", ".join(map(str, lines[:SHOWN_SKIPPED_LINES])) + (" …" if len(lines) > SHOWN_SKIPPED_LINES else "")
    return (
        f"{file_name}: {_skipped_kinds(skipped)} skipped (line {shown}): point-to-point sends and receives "
        "(p2p_perf, NCCL_INSPECTOR_ENABLE_P2P) and event records are not collectives of a communicator; "
        "its collectives are read"
    )


def _record_kind(record: dict) -> str | None:
    """None for a collective record; else the kind of record it is (its first key past header and metadata)."""
    if "coll_perf" in record:
        return None
    if P2P_KIND in record:
        return P2P_KIND
    return next((key for key in record if key not in ("header", "metadata")), "unnamed")


def _text(data: bytes, file_name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ResultFileError(f"{file_name}: byte {error.start} is not UTF-8: not an Inspector dump") from None


def _json_lines(data: bytes) -> tuple[pa.Table, list[tuple[int, str]]] | None:
    """The collective records of a dump as the plugin writes it, one object a line, read by Arrow, and the (line,
    kind) of the point-to-point records skipped; None for any other (``_json_objects`` reads those, or says what is
    wrong and where)."""
    try:
        table = pa_json.read_json(pa.BufferReader(data), read_options=_JSON_READ, parse_options=_JSON_PARSE)
    except pa.ArrowInvalid:
        return None
    lines = data.count(b"\n") + (not data.endswith(b"\n"))
    if table.num_rows != lines:  # blank lines or objects over several lines: rows are not lines
        return None
    line_numbers = np.arange(1, table.num_rows + 1, dtype=np.int64)
    collective = table.column("coll_perf").is_valid()
    p2p = table.column(P2P_KIND).is_valid()
    if not pc.all(pc.or_(collective, p2p)).as_py():
        return None  # another kind of record: read object by object, which names it
    skipped = [(int(line), P2P_KIND) for line in line_numbers[~collective.to_numpy(zero_copy_only=False)]]
    if skipped:
        table, line_numbers = table.filter(collective), line_numbers[collective.to_numpy(zero_copy_only=False)]
    header, metadata, perf = (table.column(name).combine_chunks() for name in ("header", "metadata", "coll_perf"))
    required = [header.field("id"), header.field("rank"), header.field("n_ranks"), metadata.field("hostname")]
    required += [metadata.field("pid")] + [perf.field(key) for key in ("coll", "coll_sn", "coll_msg_size_bytes")]
    required += [perf.field("coll_exec_time_us")]
    if header.null_count or metadata.null_count or perf.null_count or any(column.null_count for column in required):
        return None
    hostname = metadata.field("hostname")
    trace = perf.field("event_trace_ts")
    return pa.Table.from_arrays(
        [
            _communicator_label(header.field("id"), header.field("comm_name")),
            header.field("rank"),
            header.field("n_ranks"),
            hostname,
            pc.binary_join_element_wise(hostname, pc.cast(metadata.field("pid"), pa.string()), "/pid "),
            perf.field("coll"),
            perf.field("coll_sn"),
            perf.field("coll_msg_size_bytes"),
            perf.field("coll_exec_time_us"),
            pc.struct_field(trace, "coll_start_ts"),
            perf.field("coll_algobw_gbs"),
            perf.field("coll_busbw_gbs"),
            pa.nulls(table.num_rows, pa.float64()),
            pa.array(line_numbers),
        ],
        schema=RECORDS_SCHEMA,
    ), skipped


def _communicator_label(ids: pa.Array, names: pa.Array) -> pa.Array:
    """The communicator as its group is labelled: NCCL 2.30's ``header.comm_name`` (PyTorch's process group
    description, e.g. "default_pg") before its id, which stays because communicators may share a name (every TP
    group is "tp"); the id alone where the dump has no name."""
    named = pc.and_(pc.is_valid(names), pc.not_equal(pc.fill_null(names, ""), ""))
    labelled = pc.binary_join_element_wise(pc.fill_null(names, ""), " (", ids, ")", "")
    return pc.if_else(named, labelled, ids)


def _json_objects(text: str, file_name: str) -> tuple[pa.Table, list[tuple[int, str]]]:
    """The collective records of any dump, object by object, and the (line, kind) of the records of other kinds
    skipped (``_record_kind``); a malformed one is refused with its line and key."""
    rows: list[tuple] = []
    skipped: list[tuple[int, str]] = []
    for line, record in _objects(text, file_name):
        where = f"{file_name}: line {line}"
        if (kind := _record_kind(record)) is not None:
            skipped.append((line, kind))
            continue
        communicator = _field(record, "header", "id", (str,), where)
        name = record["header"].get("comm_name") if isinstance(record.get("header"), dict) else None
        if isinstance(name, str) and name:
            communicator = f"{name} ({communicator})"
        rank = _field(record, "header", "rank", (int,), where)
        n_ranks = _field(record, "header", "n_ranks", (int,), where)
        host = _field(record, "metadata", "hostname", (str,), where)
        pid = _field(record, "metadata", "pid", (int,), where)
        coll = _field(record, "coll_perf", "coll", (str,), where)
        sn = _field(record, "coll_perf", "coll_sn", (int,), where)
        message = _field(record, "coll_perf", "coll_msg_size_bytes", (int,), where)
        time_us = _field(record, "coll_perf", "coll_exec_time_us", (int, float), where)
        algbw = _field(record, "coll_perf", "coll_algobw_gbs", (int, float), where, required=False)
        busbw = _field(record, "coll_perf", "coll_busbw_gbs", (int, float), where, required=False)
        trace = record["coll_perf"].get("event_trace_ts")
        start = trace.get("coll_start_ts") if isinstance(trace, dict) else None
        start = float(start) if isinstance(start, int | float) and not isinstance(start, bool) else None
        rows.append((communicator, rank, n_ranks, host, f"{host}/pid {pid}", coll, sn, message, float(time_us), start,
                     algbw, busbw, None, line))  # fmt: skip
    return _records(rows), skipped


def _records(rows: list[tuple]) -> pa.Table:
    columns = zip(*rows, strict=True) if rows else [[]] * len(RECORDS_SCHEMA)
    arrays = [pa.array(column, field.type) for column, field in zip(columns, RECORDS_SCHEMA, strict=True)]
    return pa.Table.from_arrays(arrays, schema=RECORDS_SCHEMA)


def _objects(text: str, file_name: str):
    """(line, object) for each top-level JSON object of the file."""
    decoder = json.JSONDecoder()
    position = _WHITESPACE.match(text).end()
    line = 1 + text.count("\n", 0, position)
    while position < len(text):
        try:
            value, end = decoder.raw_decode(text, position)
        except (json.JSONDecodeError, RecursionError) as error:
            message = error.msg if isinstance(error, json.JSONDecodeError) else "nested too deeply"
            ended = message.startswith("Unterminated") or getattr(error, "pos", 0) >= len(text.rstrip())
            truncated = " (the dump is cut short)" if ended else ""
            raise ResultFileError(f"{file_name}: line {line}: not a JSON object: {message}{truncated}") from None
        if not isinstance(value, dict):
            raise ResultFileError(f"{file_name}: line {line}: a JSON {type(value).__name__}, not an Inspector object")
        yield line, value
        next_position = _WHITESPACE.match(text, end).end()
        line += text.count("\n", position, next_position)
        position = next_position


def _field(record: dict, section: str, key: str, kinds: tuple[type, ...], where: str, *, required: bool = True):
    part = record.get(section)
    if not isinstance(part, dict):
        raise ResultFileError(f"{where}: no {section!r} object")
    value = part.get(key)
    if value is None and not required:
        return None
    if value == "nan" and not required:  # the plugin writes a NaN double as the string "nan": no figure
        return None
    if isinstance(value, bool) or not isinstance(value, kinds):
        wanted = " or ".join(kind.__name__ for kind in kinds)
        raise ResultFileError(f"{where}: {section}.{key} is {value!r}, expected {wanted}")
    if isinstance(value, int) and not -INT64_LIMIT <= value < INT64_LIMIT:
        if key == "coll_msg_size_bytes":
            raise ResultFileError(f"{where}: a size of {value} B does not fit a 64-bit integer")
        raise ResultFileError(f"{where}: {section}.{key} is {value}, past a 64-bit integer")
    return value


def _prometheus_records(text: str, file_name: str) -> pa.Table:
    """One record per call from the samples of a Prometheus textfile, each line read by prometheus_client's
    parser; a line it refuses, or a call without its time, is named."""
    from prometheus_client.parser import text_string_to_metric_families

    calls: dict[tuple, dict] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            [family] = text_string_to_metric_families(line + "\n")
            [sample] = family.samples
        except ValueError as error:
            raise ResultFileError(f"{file_name}: line {number}: not a Prometheus sample: {error}") from None
        metric = _METRICS.get(sample.name)
        if metric is None:
            continue  # another exporter's metric in the same textfile directory
        labels = sample.labels
        if "comm_id" not in labels and ("comm_name" in labels or "version" in labels):
            raise ResultFileError(
                f"{file_name}: line {number}: the aggregated Prometheus output of a later Inspector (NCCL 2.30 on: "
                "per communicator name, collective and message-size range, e.g. 1-2MB, the calls since the last "
                "dump summed into one figure, with no rank, call number or exact size) holds no single call, which "
                "is what a run is made of: import its JSON dump instead (NCCL_INSPECTOR_PROM_DUMP=0, the files "
                "<hostname>-pid<pid>.log in NCCL_INSPECTOR_DUMP_DIR)"
            )
        call = calls.setdefault(tuple(sorted(labels.items())), {"line": number, "labels": labels})
        call[metric] = sample.value
    return _records([_prometheus_row(call, f"{file_name}: line {call['line']}", file_name) for call in calls.values()])


def _prometheus_row(call: dict, where: str, file_name: str) -> tuple:
    labels = call["labels"]

    def label(name: str, *aliases: str) -> str:
        for key in (name, *aliases):
            if key in labels:
                return labels[key]
        raise ResultFileError(f"{where}: no {name} label")

    def integer(name: str, *aliases: str) -> int:
        value = label(name, *aliases)
        if not value.isdigit() or int(value) >= INT64_LIMIT:
            raise ResultFileError(f"{where}: label {name} is {value!r}, expected a whole number")
        return int(value)

    if "time_us" not in call:
        raise ResultFileError(f"{where}: no {TIME_METRIC} sample for this call")
    size = _SIZE_LABEL.match(label("message_size"))
    if size is None:
        raise ResultFileError(
            f"{where}: label message_size is {labels['message_size']!r}, expected e.g. 512B or 2.00GB"
        )
    exact, figure, unit = size.groups()
    message = int(exact) if exact else round(float(figure) * 1024 ** _UNITS[unit])
    host = label("hostname")
    device = labels.get("pid") or labels.get("gpu_device_id") or file_name
    return (
        label("comm_id"),
        integer("rank"),
        integer("n_ranks", "nranks"),
        host,
        f"{host}/{device}",
        label("collective"),
        integer("coll_sn"),
        message,
        call["time_us"],
        None,
        call.get("algbw"),
        call.get("busbw"),
        0.0 if exact else 0.005 / float(figure),
        call["line"],
    )


def _calls(records: pa.Table, file_name: str, tolerance: tuple[float, float]) -> FileCalls:
    """The file's records as ``RANK_CALLS_SCHEMA`` rows, checked: ranks within their communicator, sizes and
    times that can be, each call once per rank (a call dumped twice is kept once), busbw ours and the file's."""
    rank, n_ranks = records.column("rank").to_numpy(), records.column("n_ranks").to_numpy()
    message, time_us = records.column("message").to_numpy(), records.column("time_us").to_numpy()
    lines = records.column("line").to_numpy()

    def refuse(bad: np.ndarray, what) -> None:
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ResultFileError(f"{file_name}: line {lines[row]}: {what(row)}")

    refuse(
        (n_ranks < 1) | (rank < 0) | (rank >= n_ranks), lambda row: f"header rank {rank[row]} of n_ranks {n_ranks[row]}"
    )
    with np.errstate(invalid="ignore"):
        refuse((message < 0) | ~np.isfinite(time_us) | (time_us < 0),
               lambda row: "coll_perf has a negative or non-finite size or time")  # fmt: skip
    communicators = pc.dictionary_encode(records.column("communicator")).combine_chunks()
    comm_code = communicators.indices.to_numpy()
    sn = records.column("sn").to_numpy()
    # The same call dumped twice: the first is kept.
    order = np.lexsort((np.arange(len(sn)), rank, sn, comm_code))
    repeated = np.zeros(len(sn), dtype=bool)
    repeated[order[1:]] = (np.diff(comm_code[order]) == 0) & (np.diff(sn[order]) == 0) & (np.diff(rank[order]) == 0)
    if repeated.any():
        kept = pa.array(~repeated)
        records, communicators = records.filter(kept), communicators.filter(kept)
        rank, n_ranks, message, time_us, lines, sn = (
            a[~repeated] for a in (rank, n_ranks, message, time_us, lines, sn)
        )
    # Collectives by name: a handful of distinct names over all the records.
    names = pc.dictionary_encode(records.column("coll")).combine_chunks()
    name_code = names.indices.to_numpy()
    ops = [normalise_op_name(name) for name in names.dictionary.to_pylist()]
    per_rank_piece = np.array([op in PER_RANK_PIECE_OPS for op in ops], dtype=bool)[name_code]
    too_large = per_rank_piece & (message > (INT64_LIMIT - 1) // np.maximum(n_ranks, 1))
    refuse(too_large, lambda row: f"a size of {int(message[row]) * int(n_ranks[row])} B does not fit a 64-bit integer")
    size = np.where(per_rank_piece, message * n_ranks, message)
    busbw = records.column("busbw").to_numpy(zero_copy_only=False)
    warnings = _busbw_check(ops, name_code, n_ranks, size, time_us, busbw, records, lines, file_name, tolerance)
    table = pa.Table.from_arrays(
        [
            communicators,
            pa.array(n_ranks),
            renamed_text(names, collective_of),
            pa.array(size),
            pa.array(sn),
            pc.cast(pa.array(rank), pa.string()).dictionary_encode(),
            pc.dictionary_encode(records.column("host")).combine_chunks(),
            pc.dictionary_encode(records.column("process")).combine_chunks(),
            pa.array(time_us),
            records.column("start_us").combine_chunks(),
            pa.nulls(len(sn), pa.int64()),
            pa.array(lines),
            records.column("algbw").combine_chunks(),
            records.column("busbw").combine_chunks(),
            pa.nulls(len(sn), pa.int64()),
            pa.nulls(len(sn), pa.string()),
        ],
        schema=RANK_CALLS_SCHEMA,
    )
    return FileCalls(file_name=file_name, calls=[], members={}, steps=set(), warnings=warnings, table=table)


def named_ranks(calls: pa.Table) -> pa.Table:
    """The job's records (``RANK_CALLS_SCHEMA``, ``rank`` still the rank in the record's communicator) with each
    rank named by its process's rank in the largest communicator the process belongs to (the lowest, if two are
    as large), over every file given: one Prometheus snapshot may hold no call of the world."""
    processes = calls.column("process").combine_chunks()
    code = processes.indices.to_numpy()
    rank = pc.cast(pc.cast(calls.column("rank"), pa.string()), pa.int64()).to_numpy()
    n_ranks = calls.column("group_size").to_numpy()
    order = np.lexsort((rank, -n_ranks, code))
    first = order[np.r_[True, np.diff(code[order]) != 0]]
    labels = dict.fromkeys(processes.dictionary.to_pylist(), "")
    process_names = processes.dictionary.to_pylist()
    for row in first:
        labels[process_names[code[row]]] = str(rank[row])
    named = renamed_text(processes, labels.__getitem__)
    return calls.set_column(calls.schema.get_field_index("rank"), "rank", named)


def _busbw_check(ops, name_code, n_ranks, size, time_us, busbw, records, lines, file_name, tolerance) -> list[str]:
    """A warning when the file's busbw differs from ours (the project's factor on the whole-buffer size) on any
    record, beyond the precision the file prints it with."""
    absolute, relative = tolerance
    factor = np.full(len(size), np.nan)
    for code, op in enumerate(ops):
        if op is None:
            continue
        mine = name_code == code
        for ranks in np.unique(n_ranks[mine]):
            factor[mine & (n_ranks == ranks)] = bus_bandwidth_factor(op, int(ranks))
    with np.errstate(divide="ignore", invalid="ignore"):
        ours = size / (time_us * 1e-6) / 1e9 * factor
        rounding = records.column("size_rounding").to_numpy(zero_copy_only=False)
        allowed = absolute + (relative + np.nan_to_num(rounding)) * np.abs(busbw)
        differing = (time_us > 0) & ~np.isnan(factor) & ~np.isnan(busbw) & (np.abs(ours - busbw) > allowed)
    if not differing.any():
        return []
    row = int(np.flatnonzero(differing)[0])
    return [
        f"{file_name}: busbw differs from ours on {int(differing.sum())} records (first: {file_name}: line "
        f"{lines[row]}: {busbw[row]} GB/s in the file, {ours[row]:.6f} ours)"
    ]
