"""PyTorch profiler traces (``torch.profiler`` → ``export_chrome_trace``: Kineto's Chrome-trace JSON), one per rank.

A trace of a ``torch.distributed`` job names its rank and process groups in ``distributedInfo``
(``{"backend": "gloo", "rank": 0, "world_size": 2, "pg_count": 1, "pg_config": [{"pg_name": "0",
"pg_desc": "default_pg", "pg_size": 2, "ranks": [0, 1]}]}``) and its machine in ``host_name``.
``ProfilerStep#N`` events (``prof.step()``) mark the training steps: a call belongs to the step it was issued
in. Sizes are whole buffers (nccl-tests' size, and the plan's): an all-gather's output, a reduce-scatter's
input; ``elements`` counts the whole buffer too, and types take nccl-tests' names (``float``, ``bfloat16``,
``int64``) on either backend. Calls that move no data (``barrier``) are skipped. JSON that breaks (a trace cut
short) is refused naming the ``traceEvents`` entry it broke in, and its line and column.

**record_param_comms** (ProcessGroupNCCL; PyTorch's ``RECORD_PARAM_COMMS_DATA``): one CPU event per c10d call, whose
args (``saveNcclMeta`` in torch/csrc/profiler/util.cpp) name the collective asked for (``"Collective name"``:
``allreduce``, ``_allgather_base``, ``_reduce_scatter_base``, ``all_to_allv``, ``broadcast`` …), its ``"In msg
nelems"`` and ``"Out msg nelems"`` (the whole buffer is the larger), ``"dtype"`` (c10's names: ``Float``,
``BFloat16`` …), ``"Group size"``, and, where the PyTorch version records them, the process group (``"Process Group
Name"``, ``"Process Group Description"``, ``"Process Group Ranks"`` as ``"[0, 1]"``, cut after 30 ranks) and its
sequence number ``"Seq"``. Each process group is a communicator (``pg 1 (metrics)``) with the size the event states
and the members ``distributedInfo`` lists for it (else the event's ranks, when not cut). The time is the device's:
Kineto links the kernels a call launched to its event (the kernel's ``"External id"`` is the event's, and Kineto
copies the collective's fields onto it); a call with no linked kernel (a CPU-only profile) is timed by its CPU
event, which times the launch, not the transfer: a warning says how many. Ranks join a call by its group's sequence
number where the events state it, else by order (the n-th call of that collective and size in the group).

**gloo** (PyTorch 2.13 records no ``record_param_comms`` for gloo; checked on traces it made): every call gloo
ran is a ``gloo:<op>`` event on one of its worker threads, timed from its start to its end, with its input's
``Input Dims`` and ``Input type`` (``record_shapes=True``): what went on the wire, which is not always what was
asked — gloo runs ``reduce_scatter_tensor`` as an all-reduce of the whole input. The calling thread's
``c10d::_reduce_scatter_base_`` op (output, then input in its ``Input Dims``) says what was asked: the gloo
all-reduces of E elements pair in order with the ``c10d::allreduce_`` and ``c10d::_reduce_scatter_base_``
ops of E elements (the calls gloo runs as all-reduces), and take their collective; where the counts differ
they stay all-reduces, with a warning. (Read from gloo's events alone, an FSDP2 step's reduce-scatters would be
all-reduces, and never match its plan.) An all-gather's input is one rank's piece: the whole is n × that.
Ranks join a call by order, and a call's step is the one its gloo event starts in. gloo's events do not say
which process group ran them: with one group it is that group; with several, their calls are counted
together (group size known only when the groups share one), with a warning.

A trace with ``record_param_comms`` events is read from them alone; ``gloo:*`` events beside them (a gloo
group of the same job) are not counted, and a warning says so.
"""

import heapq
import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from emuplan import json_input
from emuplan.results.budget import JSON_BYTES_PER_BYTE, ImportBudget
from emuplan.results.canonical import ParsedResult, ResultFileError, ResultFileTooLarge, collective_of
from emuplan.results.formats import TORCH_PROFILER, observed
from emuplan.results.formats.rank_calls import FileCalls, RankCall
from emuplan.results.formats.upload import Upload
from emuplan.wording import plural
from emuplan.workload.collectives import CollectiveOp, normalise_op_name

_START = re.compile(rb'^\s*\{\s*"(schemaVersion|deviceProperties|distributedInfo|traceEvents)"')
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_TRACE_EVENTS = re.compile(r'"traceEvents"\s*:\s*\[')
GLOO_PREFIX = "gloo:"
PARAM_COMMS = "record_param_comms"
# The c10d ops gloo runs as all-reduces, and the collective each asks for.
_C10D_ALL_REDUCES = {"c10d::allreduce_": CollectiveOp.ALL_REDUCE.value,
                     "c10d::_reduce_scatter_base_": CollectiveOp.REDUCE_SCATTER.value}  # fmt: skip
# Ops that move no data.
_SKIPPED = frozenset({"barrier"})
# Bytes per element, and nccl-tests' name for the type (its own for those it lacks), of the C++ type names the
# profiler records as gloo's ``Input type`` and of c10's ScalarType names (``c10::toString``), record_param_comms'
# ``dtype``: one job's types read alike on either backend.
_TYPES = {"float": (4, "float"), "double": (8, "double"), "c10::Half": (2, "half"), "c10::BFloat16": (2, "bfloat16"),
          "long int": (8, "int64"), "int": (4, "int32"), "short int": (2, "int16"), "signed char": (1, "int8"),
          "unsigned char": (1, "uint8"), "bool": (1, "bool"), "c10::Float8_e4m3fn": (1, "f8e4m3"),
          "c10::Float8_e5m2": (1, "f8e5m2")}  # fmt: skip
_SCALAR_TYPES = {"Byte": (1, "uint8"), "Char": (1, "int8"), "Short": (2, "int16"), "Int": (4, "int32"),
                 "Long": (8, "int64"), "Half": (2, "half"), "Float": (4, "float"), "Double": (8, "double"),
                 "ComplexHalf": (4, "complex32"), "ComplexFloat": (8, "complex64"),
                 "ComplexDouble": (16, "complex128"), "Bool": (1, "bool"), "BFloat16": (2, "bfloat16"),
                 "Float8_e5m2": (1, "f8e5m2"), "Float8_e4m3fn": (1, "f8e4m3"),
                 "Float8_e5m2fnuz": (1, "f8e5m2fnuz"), "Float8_e4m3fnuz": (1, "f8e4m3fnuz"),
                 "UInt16": (2, "uint16"), "UInt32": (4, "uint32"), "UInt64": (8, "uint64")}  # fmt: skip
# ProcessGroupNCCL's variants of one collective: _allgather_base, allgather_into_tensor_coalesced, _broadcast_oop.
_VARIANT_SUFFIXES = ("_into_tensor_coalesced", "_tensor_coalesced", "_coalesced", "_base", "_oop")


def looks_like(head: bytes) -> bool:
    return bool(_START.match(head)) and (b'"traceEvents"' in head or b'"distributedInfo"' in head)


def recognises(upload: Upload) -> bool:
    return looks_like(upload.head)


def parse(upload: Upload) -> ParsedResult:
    """One rank's trace as a run; ``observed`` joins the traces of a job (an archive, or several uploads)."""
    return observed.parse_observed([(upload.file_name, upload.content())], TORCH_PROFILER, budget=upload.budget)


def _document(content: bytes | memoryview, file_name: str, max_events: int) -> dict:
    text = bytes(content)
    try:
        document = json_input.loads(text)
    except UnicodeDecodeError as error:
        raise ResultFileError(f"{file_name}: byte {error.start} is not UTF-8: not a profiler trace") from None
    except json.JSONDecodeError as error:
        ended = error.msg.startswith("Unterminated") or error.pos >= len(text.rstrip()) - 1
        cut = " (the trace is cut short)" if ended else ""
        event = _event_at(text.decode(), error.pos)
        where = f"traceEvents[{event}], " if event is not None else ""
        raise ResultFileError(
            f"{file_name}: {where}line {error.lineno} column {error.colno}: not valid JSON: {error.msg}{cut}"
        ) from None
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        raise ResultFileError(f"{file_name}: no traceEvents list: not a PyTorch profiler trace")
    if len(document["traceEvents"]) > max_events:
        raise ResultFileTooLarge(
            f"{file_name}: {len(document['traceEvents'])} traceEvents, more than the {max_events} a trace may hold "
            "(EMUPLAN_MAX_TRACE_EVENTS); profile fewer steps (torch.profiler.schedule's active)"
        )
    return document


def _event_at(text: str, position: int) -> int | None:
    """The index of the traceEvents entry that holds ``position`` (where the JSON broke), if it is in one."""
    events = _TRACE_EVENTS.search(text)
    if events is None or position < events.end():
        return None
    decoder = json.JSONDecoder()
    index, at = 0, events.end()
    while True:
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        if at >= position:
            return index
        if text.startswith("]", at):
            return None
        try:
            _, at = decoder.raw_decode(text, at)
        except (json.JSONDecodeError, RecursionError):
            return index
        if at > position:
            return index
        index += 1


def _span(event: dict, where: str, name: str) -> tuple[float, float]:
    start, duration = event.get("ts"), event.get("dur")
    if not all(isinstance(v, int | float) and math.isfinite(v) for v in (start, duration)) or duration < 0:
        raise ResultFileError(f"{where}: {name} has no finite ts and dur")
    return float(start), float(duration)


@dataclass
class _Events:
    """What one pass over traceEvents keeps: (index, event) of the kinds this module reads."""

    steps: list[tuple[float, float, int]] = field(default_factory=list)
    param_comms: list[tuple[int, dict]] = field(default_factory=list)
    gloo: list[tuple[int, dict]] = field(default_factory=list)
    c10d_all_reduces: list[tuple[int, dict]] = field(default_factory=list)
    # Kernel (start, duration) per the "External id" of the CPU event that launched them.
    kernels: dict[int, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))


def _events(document: dict, file_name: str) -> _Events:
    found = _Events()
    for index, event in enumerate(document["traceEvents"]):
        if not isinstance(event, dict):
            raise ResultFileError(f"{file_name}: traceEvents[{index}]: not an object")
        name = event.get("name")
        if event.get("ph") != "X" or not isinstance(name, str):
            continue
        if step := _STEP.match(name):
            start, duration = _span(event, f"{file_name}: traceEvents[{index}]", name)
            found.steps.append((start, start + duration, int(step.group(1))))
        elif name == PARAM_COMMS:
            found.param_comms.append((index, event))
        elif name.startswith(GLOO_PREFIX):
            found.gloo.append((index, event))
        elif name in _C10D_ALL_REDUCES:
            found.c10d_all_reduces.append((index, event))
        elif event.get("cat") == "kernel":
            args = event.get("args")
            launched_by = args.get("External id") if isinstance(args, dict) else None
            if isinstance(launched_by, int):
                found.kernels[launched_by].append(_span(event, f"{file_name}: traceEvents[{index}]", name))
    return found


@dataclass(frozen=True, slots=True)
class _Call:
    """One call as this rank's trace states it, before ranks are joined."""

    where: str
    start_us: float
    duration_us: float
    issued_us: float  # what puts it in a training step
    communicator: str
    group_size: int | None
    collective: str
    size_bytes: int
    elements: int
    dtype: str
    sequence: int | None = None


@dataclass(frozen=True, slots=True)
class _Group:
    communicator: str
    size: int | None
    members: list[str]


def _rank_list(value) -> list[str] | None:
    """Ranks as ``pg_config`` (a list) or ``record_param_comms`` (``"[0, 1]"``) state them; None when cut short
    (``"[0, 1, ..., 63]"``) or absent."""
    if isinstance(value, str) and "..." not in value:
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if isinstance(value, list) and all(isinstance(rank, int) for rank in value):
        return [str(rank) for rank in value]
    return None


def _communicator(name, description) -> str:
    return f"pg {name} ({description})" if description else f"pg {name}"


def _lumped_group(info: dict, file_name: str) -> tuple[_Group, list[str]]:
    """The communicator of calls whose events do not name their process group (see the module's docstring)."""
    groups = info.get("pg_config")
    if not isinstance(groups, list) or not groups or not all(isinstance(g, dict) for g in groups):
        raise ResultFileError(f"{file_name}: distributedInfo has no pg_config list")
    if len(groups) == 1:
        group = groups[0]
        size = group.get("pg_size") if isinstance(group.get("pg_size"), int) else None
        members = _rank_list(group.get("ranks")) or []
        return _Group(_communicator(group.get("pg_name"), group.get("pg_desc")), size, members), []
    sizes = {group.get("pg_size") for group in groups}
    size = sizes.pop() if len(sizes) == 1 else None
    warning = (
        f"{file_name}: {len(groups)} process groups, and gloo's events do not say which ran a call: "
        "their calls are counted together"
    )
    return _Group("gloo (process group not recorded)", size, []), [warning]


def _whole(op: CollectiveOp | None, elements: int, group_size: int | None) -> int:
    return elements * group_size if op is CollectiveOp.ALL_GATHER and group_size else elements


def _gloo_calls(found: _Events, info: dict, file_name: str) -> tuple[list[_Call], list[_Group], list[str]]:
    group, warnings = _lumped_group(info, file_name)
    wire = []
    for index, event in found.gloo:
        where = f"{file_name}: traceEvents[{index}]"
        name = event["name"]
        op_name = name.removeprefix(GLOO_PREFIX)
        if op_name in _SKIPPED:
            continue
        start, duration = _span(event, where, name)
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        dims, types = args.get("Input Dims"), args.get("Input type")
        if not (isinstance(dims, list) and dims and isinstance(dims[0], list) and isinstance(types, list) and types):
            raise ResultFileError(f"{where}: {name} has no Input Dims and Input type (profile with record_shapes=True)")
        if not all(isinstance(d, int) and d >= 0 for d in dims[0]):
            raise ResultFileError(f"{where}: {name} has Input Dims {dims[0]!r}")
        if types[0] not in _TYPES:
            raise ResultFileError(f"{where}: {name} has an input of type {types[0]!r}, whose size is not known")
        element_bytes, dtype = _TYPES[types[0]]
        wire.append((where, start, duration, collective_of(op_name), math.prod(dims[0]), dtype, element_bytes))
    asked = _asked_of_all_reduces(found, file_name, warnings)
    calls = []
    for where, start, duration, collective, elements, dtype, element_bytes in sorted(wire, key=lambda w: w[1]):
        if collective == CollectiveOp.ALL_REDUCE.value and elements in asked:
            collective = next(asked[elements])
        whole = _whole(normalise_op_name(collective), elements, group.size)
        calls.append(
            _Call(
                where=where,
                start_us=start,
                duration_us=duration,
                issued_us=start,
                communicator=group.communicator,
                group_size=group.size,
                collective=collective,
                size_bytes=whole * element_bytes,
                elements=whole,
                dtype=dtype,
            )
        )
    return calls, [group], warnings


def _asked_of_all_reduces(found: _Events, file_name: str, warnings: list[str]) -> dict[int, Iterator[str]]:
    """Per element count, the collectives asked of the gloo all-reduces of that many elements, in issue order
    (``c10d::allreduce_`` and ``c10d::_reduce_scatter_base_``); none where the counts differ (a warning)."""
    asked: dict[int, list[tuple[float, str]]] = defaultdict(list)
    for index, event in found.c10d_all_reduces:
        where = f"{file_name}: traceEvents[{index}]"
        name = event["name"]
        start, _ = _span(event, where, name)
        dims = event["args"].get("Input Dims") if isinstance(event.get("args"), dict) else None
        # allreduce_(tensors, …): the first tensor of its list; _reduce_scatter_base_(output, input, …): the input.
        if name == "c10d::allreduce_":
            reduced = dims[0][0] if _is_list(dims, 0) and dims[0] else None
        else:
            reduced = dims[1] if _is_list(dims, 1) else None
        if not (isinstance(reduced, list) and all(isinstance(d, int) and d >= 0 for d in reduced)):
            raise ResultFileError(f"{where}: {name} has no tensor shapes (profile with record_shapes=True)")
        asked[math.prod(reduced)].append((start, _C10D_ALL_REDUCES[name]))
    ran = Counter(
        math.prod(event["args"]["Input Dims"][0])
        for _, event in found.gloo
        if event["name"] == GLOO_PREFIX + "all_reduce"
    )
    told: dict[int, Iterator[str]] = {}
    for elements, calls in asked.items():
        scatters = sum(collective == CollectiveOp.REDUCE_SCATTER.value for _, collective in calls)
        if len(calls) == ran[elements]:
            # Taken one at a time, in order, by as many gloo all-reduces of that size as there are calls.
            told[elements] = iter([collective for _, collective in sorted(calls)])
        elif scatters:
            warnings.append(
                f"{file_name}: {plural(ran[elements], 'gloo all-reduce')} of {elements} elements, but "
                f"{plural(len(calls), 'c10d call')} that gloo runs as one ({scatters} reduce_scatter_tensor): "
                "not told apart, all read as all-reduces"
            )
    return told


def _is_list(dims, position: int) -> bool:
    return isinstance(dims, list) and len(dims) > position and isinstance(dims[position], list)


def _param_comms_calls(found: _Events, info: dict, file_name: str) -> tuple[list[_Call], list[_Group], list[str]]:
    configured = {
        str(g.get("pg_name")): _rank_list(g.get("ranks")) for g in info.get("pg_config") or [] if isinstance(g, dict)
    }
    groups: dict[str, _Group] = {}
    calls, launch_timed, warnings = [], 0, []
    for index, event in found.param_comms:
        where = f"{file_name}: traceEvents[{index}]"
        start, duration = _span(event, where, PARAM_COMMS)
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        name, dtype = args.get("Collective name"), args.get("dtype")
        counts, group_size = (args.get("In msg nelems"), args.get("Out msg nelems")), args.get("Group size")
        if not (isinstance(name, str) and isinstance(dtype, str)):
            raise ResultFileError(f"{where}: {PARAM_COMMS} has no Collective name and dtype")
        if not (all(isinstance(n, int) and n >= 0 for n in counts) and isinstance(group_size, int) and group_size > 0):
            raise ResultFileError(f"{where}: {PARAM_COMMS} ({name}) has no In/Out msg nelems and Group size")
        if name in _SKIPPED or not any(counts):
            continue
        if dtype not in _SCALAR_TYPES:
            raise ResultFileError(f"{where}: {PARAM_COMMS} ({name}) has dtype {dtype!r}, whose size is not known")
        element_bytes, dtype = _SCALAR_TYPES[dtype]
        group = _param_comms_group(args, configured, group_size, info, file_name, groups, warnings)
        kernels = found.kernels.get(args.get("External id"))
        if kernels:  # several for one call (coalesced): from the first's start to the last's end
            begin = min(k[0] for k in kernels)
            duration = kernels[0][1] if len(kernels) == 1 else max(k[0] + k[1] for k in kernels) - begin
        else:
            begin = start
            launch_timed += 1
        collective = _asked_collective(name)
        point_to_point = normalise_op_name(collective) is CollectiveOp.SEND_RECV
        sequence = args.get("Seq") if isinstance(args.get("Seq"), int) and not point_to_point else None
        elements = max(counts)
        calls.append(
            _Call(
                where=where,
                start_us=begin,
                duration_us=duration,
                issued_us=start,
                communicator=group.communicator,
                group_size=group_size,
                collective=collective,
                size_bytes=elements * element_bytes,
                elements=elements,
                dtype=dtype,
                sequence=sequence,
            )
        )
    if launch_timed:
        warnings.append(
            f"{file_name}: {plural(launch_timed, 'call')} with no device kernel linked to its {PARAM_COMMS} event: "
            "timed by that CPU event, which times the launch, not the transfer"
        )
    if others := sum(1 for _, event in found.gloo if event["name"] != GLOO_PREFIX + "barrier"):
        warnings.append(
            f"{file_name}: {plural(others, 'gloo:* call')} beside the {PARAM_COMMS} events not counted "
            f"(the trace is read from its {PARAM_COMMS} events alone)"
        )
    return calls, list(groups.values()), warnings


def _param_comms_group(args: dict, configured: dict, size: int, info: dict, file_name: str, groups: dict, warnings):
    """The communicator a record_param_comms event names (or, without a name, as for gloo), kept in ``groups``."""
    name = args.get("Process Group Name")
    if not isinstance(name, str):
        group, notes = _lumped_group(info, file_name)
        if group.communicator not in groups:
            warnings.extend(notes)
    else:
        members = configured.get(name) or _rank_list(args.get("Process Group Ranks")) or []
        group = _Group(_communicator(name, args.get("Process Group Description")), size, members)
    return groups.setdefault(group.communicator, group)


def _asked_collective(name: str) -> str:
    """A CollectiveOp value for ProcessGroupNCCL's names (``_allgather_base``, ``allreduce_coalesced``,
    ``all_to_allv``); anything else as written."""
    base = name.strip("_")
    for suffix in _VARIANT_SUFFIXES:
        base = base.removesuffix(suffix)
    return collective_of(base)


def _steps_issued_in(steps: list[tuple[float, float, int]], issued: list[float]) -> list[int | None]:
    """The step each time falls in (ends included): of the steps holding it, the first in the trace's order (steps
    should not overlap, but a trace is outside input). One sweep in time order with a heap of the steps begun,
    keyed by their place in the trace: O((calls + steps) log steps), where trying every step per call took 11.6 s
    of 100 k events' 16 s."""
    by_start = sorted(range(len(steps)), key=lambda index: steps[index][0])
    by_time = sorted(range(len(issued)), key=issued.__getitem__)
    begun: list[tuple[int, float]] = []  # (place in the trace, end) of every step begun by now
    found: list[int | None] = [None] * len(issued)
    next_step = 0
    for call in by_time:
        at = issued[call]
        while next_step < len(by_start) and steps[by_start[next_step]][0] <= at:
            heapq.heappush(begun, (by_start[next_step], steps[by_start[next_step]][1]))
            next_step += 1
        # A step ended by now has ended for every later call too.
        while begun and begun[0][1] < at:
            heapq.heappop(begun)
        if begun:
            found[call] = steps[begun[0][0]][2]
    return found


def file_calls(content: bytes | memoryview, file_name: str, budget: ImportBudget) -> FileCalls:
    """One rank's calls, as ``observed`` reads a job's files: the objects its JSON becomes charged to ``budget``
    first (at most ``JSON_BYTES_PER_BYTE`` per byte), its events capped by the import's limit."""
    budget.holds(len(content) * JSON_BYTES_PER_BYTE, file_name)
    return trace_calls(content, file_name, budget.limits.max_trace_events)


def named_ranks(calls: pa.Table) -> pa.Table:
    """The job's records as they are: a trace names its rank by the job's global rank already
    (``distributedInfo.rank``)."""
    return calls


def trace_calls(content: bytes | memoryview, file_name: str, max_events: int) -> FileCalls:
    """One rank's calls, read with the cyclic garbage collector paused (``json_input.collection_paused``); a trace of
    more than ``max_events`` events is refused (413) as soon as it is parsed (the import's budget has charged its
    JSON's objects before)."""
    with json_input.collection_paused():
        return _file_calls(content, file_name, max_events)


def _file_calls(content: bytes | memoryview, file_name: str, max_events: int) -> FileCalls:
    document = _document(content, file_name, max_events)
    info = document.get("distributedInfo")
    if not isinstance(info, dict) or not isinstance(info.get("rank"), int):
        raise ResultFileError(f"{file_name}: no distributedInfo with a rank: not a trace of a torch.distributed job")
    rank = str(info["rank"])
    host = document.get("host_name") if isinstance(document.get("host_name"), str) else ""
    found = _events(document, file_name)
    if found.param_comms:
        found_calls, groups, warnings = _param_comms_calls(found, info, file_name)
    else:
        found_calls, groups, warnings = _gloo_calls(found, info, file_name)
    if not found_calls:
        raise ResultFileError(
            f"{file_name}: no collective in the trace: neither {PARAM_COMMS} events (NCCL) nor gloo:* events "
            "(profile a torch.distributed job, with record_shapes=True for gloo)"
        )
    occurrences: Counter = Counter()
    calls = []
    ordered = sorted(found_calls, key=lambda c: c.start_us)
    steps = _steps_issued_in(found.steps, [call.issued_us for call in ordered])
    for call, step in zip(ordered, steps, strict=True):
        order = (call.communicator, call.sequence, call.collective, call.size_bytes)
        occurrences[order] += 1
        known = (call.collective, call.size_bytes)
        calls.append(
            RankCall(
                communicator=call.communicator,
                group_size=call.group_size,
                collective=call.collective,
                size_bytes=call.size_bytes,
                # Calls coalesced under one sequence number are told apart by their order.
                call_key=(*known, occurrences[order])
                if call.sequence is None
                else (*known, call.sequence, occurrences[order]),
                rank=rank,
                host=host,
                duration_us=call.duration_us,
                start_us=call.start_us,
                step=step,
                where=call.where,
                dtype=call.dtype,
                elements=call.elements,
            )
        )
    return FileCalls(
        file_name=file_name,
        calls=calls,
        members={group.communicator: set(group.members) for group in groups if group.members},
        steps={number for _, _, number in found.steps},
        warnings=warnings,
    )
