"""NCCL Inspector dumps (NCCL's profiler plugin, ``ext-profiler/inspector`` in NVIDIA/nccl; RCCL ships a port).

Each process writes ``<hostname>-pid<pid>.log`` into the dump directory: JSON objects one after the other,
each compact on its own line (``inspectorCommInfoDump``: the object, then a newline), one per collective the
dump thread saw completed, per communicator::

    {"header": {"id": "0x7f8c496ae9f661", "rank": 2, "n_ranks": 8, "nnodes": 1},
     "metadata": {"inspector_output_format_version": "v4.0", "git_rev": "", "rec_mechanism": "...",
                  "dump_timestamp_us": 1748030377748202, "hostname": "node-a", "pid": 1639453},
     "coll_perf": {"coll": "AllReduce", "coll_sn": 1407, "coll_msg_size_bytes": 17179869184,
                   "coll_exec_time_us": 61974, "coll_timing_source": "kernel_gpu",
                   "coll_algobw_gbs": 277.210914, "coll_busbw_gbs": 485.119099,
                   "event_trace_sn": {...}, "event_trace_ts": {"coll_start_ts": ..., ...}}}

(``event_trace_*`` only with ``NCCL_INSPECTOR_DUMP_VERBOSE=1``; ``coll_timing_source`` from format v4.) Objects
separated by any whitespace are read, so a dump pretty-printed by hand reads too.

``coll_msg_size_bytes`` is one rank's buffer; for AllGather and ReduceScatter the plugin's algbw divides
``n_ranks`` × that by the time (its ``trafficSize``), which is nccl-tests' whole-buffer size: the size kept
here, so that the project's busbw factor applied to it gives the plugin's own busbw (checked per record).
A rank is named by its rank in the largest communicator its process belongs to (the world, as a rule), so a
process is one rank across its communicators.
"""

import json
import re

import numpy as np

from emuplan.results.canonical import ResultFileError, collective_of
from emuplan.results.rank_calls import FileCalls, RankCall
from emuplan.workload.collectives import PER_RANK_PIECE_OPS, bus_bandwidth_gbps, normalise_op_name

_START = re.compile(rb"^\s*\{\s*\"header\"\s*:")
_WHITESPACE = re.compile(r"\s*")
# coll_busbw_gbs is printed with six decimals ("%lf").
_PRINTED_PRECISION = 5e-7


def looks_like(head: bytes) -> bool:
    return bool(_START.match(head))


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
    return value


def file_calls(content: bytes | memoryview, file_name: str) -> FileCalls:
    """The calls of one process's dump; a malformed or truncated object is refused with its line."""
    try:
        text = bytes(content).decode("utf-8")
    except UnicodeDecodeError as error:
        raise ResultFileError(f"{file_name}: byte {error.start} is not UTF-8: not an Inspector dump") from None
    records = []
    seen: set[tuple[str, int, int]] = set()
    for line, record in _objects(text, file_name):
        where = f"{file_name}: line {line}"
        communicator = _field(record, "header", "id", (str,), where)
        rank = _field(record, "header", "rank", (int,), where)
        n_ranks = _field(record, "header", "n_ranks", (int,), where)
        if n_ranks < 1 or not 0 <= rank < n_ranks:
            raise ResultFileError(f"{where}: header rank {rank} of n_ranks {n_ranks}")
        host = _field(record, "metadata", "hostname", (str,), where)
        pid = _field(record, "metadata", "pid", (int,), where)
        coll = _field(record, "coll_perf", "coll", (str,), where)
        sn = _field(record, "coll_perf", "coll_sn", (int,), where)
        message = _field(record, "coll_perf", "coll_msg_size_bytes", (int,), where)
        time_us = _field(record, "coll_perf", "coll_exec_time_us", (int, float), where)
        if message < 0 or not np.isfinite(time_us) or time_us < 0:
            raise ResultFileError(f"{where}: coll_perf has a negative or non-finite size or time")
        algbw = _field(record, "coll_perf", "coll_algobw_gbs", (int, float), where, required=False)
        busbw = _field(record, "coll_perf", "coll_busbw_gbs", (int, float), where, required=False)
        trace = record["coll_perf"].get("event_trace_ts")
        start = trace.get("coll_start_ts") if isinstance(trace, dict) else None
        if (communicator, sn, rank) in seen:
            continue  # the same call dumped twice
        seen.add((communicator, sn, rank))
        op = normalise_op_name(coll)
        size = message * n_ranks if op in PER_RANK_PIECE_OPS else message
        records.append((where, communicator, rank, n_ranks, host, pid, collective_of(coll), sn, size, time_us,
                        start, algbw, busbw))  # fmt: skip
    if not records:
        raise ResultFileError(f"{file_name}: no Inspector object in the file")
    # A process's rank: its rank in the largest communicator it belongs to.
    world: dict[tuple[str, int], tuple[int, int]] = {}
    for _, _, rank, n_ranks, host, pid, *_ in records:
        world[(host, pid)] = max(world.get((host, pid), (0, 0)), (n_ranks, -rank))
    calls, members, differing = [], {}, []
    for where, communicator, _, n_ranks, host, pid, collective, sn, size, time_us, start, algbw, busbw in records:
        label = str(-world[(host, pid)][1])
        members.setdefault(communicator, set()).add(label)
        op = normalise_op_name(collective)
        if op is not None and time_us > 0 and busbw is not None:
            ours = bus_bandwidth_gbps(op, size, time_us * 1e-6, n_ranks)
            if abs(ours - busbw) > _PRINTED_PRECISION + 1e-9 * abs(busbw):
                differing.append(f"{where}: {busbw} GB/s in the file, {ours:.6f} ours")
        calls.append(
            RankCall(
                communicator=communicator,
                group_size=n_ranks,
                collective=collective,
                size_bytes=size,
                call_key=(sn,),
                rank=label,
                host=host,
                duration_us=float(time_us),
                start_us=float(start) if isinstance(start, int | float) else None,
                step=None,
                where=where,
                reported_algbw_gbps=algbw,
                reported_busbw_gbps=busbw,
            )
        )
    warnings = []
    if differing:
        warnings.append(f"{file_name}: busbw differs from ours on {len(differing)} records (first: {differing[0]})")
    return FileCalls(file_name=file_name, calls=calls, members=members, steps=set(), warnings=warnings)
