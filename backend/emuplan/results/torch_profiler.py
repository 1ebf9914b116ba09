"""PyTorch profiler traces (``torch.profiler`` → ``export_chrome_trace``: Kineto's Chrome-trace JSON), one per rank.

A trace of a ``torch.distributed`` job names its rank and process groups in ``distributedInfo``
(``{"backend": "gloo", "rank": 0, "world_size": 2, "pg_count": 1, "pg_config": [{"pg_name": "0",
"pg_desc": "default_pg", "pg_size": 2, "ranks": [0, 1]}]}``) and its machine in ``host_name``. With the gloo
backend every collective gloo ran is a complete event (``"ph": "X"``) named ``gloo:<op>`` on one of its worker
threads, timed from its start to its end, with the input's ``Input Dims`` and ``Input type``
(``{"name": "gloo:all_reduce", "ts": …, "dur": 3679.7, "args": {"Input Dims": [[18696]], "Input type":
["float"]}}``): what went on the wire, which is not always what was asked (gloo runs ``reduce_scatter_tensor``
as an all-reduce of the whole buffer, and records it so). ``barrier`` moves no data and is skipped. An
all-gather's input is one rank's piece: its size here is the whole buffer, n × that (nccl-tests' size).

``ProfilerStep#N`` events (``prof.step()``) mark the training steps: a call belongs to the step its start falls
in. Calls are matched across ranks by their order: the n-th call of an op and size on one rank is the n-th on
every rank. gloo's events do not say which process group ran them: with one group it is that group; with
several, their calls are counted together (group size known only when the groups share one).

Traces of the NCCL backend (``record_param_comms`` events, kernels on the device) are not read yet.
"""

import json
import math
import re
from collections import Counter

from emuplan import json_input
from emuplan.results.canonical import ResultFileError, collective_of
from emuplan.results.rank_calls import FileCalls, RankCall
from emuplan.workload.collectives import CollectiveOp, normalise_op_name

_START = re.compile(rb'^\s*\{\s*"(schemaVersion|deviceProperties|distributedInfo|traceEvents)"')
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
GLOO_PREFIX = "gloo:"
# Ops that move no data.
_SKIPPED = frozenset({"barrier"})
# Bytes per element of the C++ type names the profiler records as ``Input type``.
_TYPE_BYTES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4,
               "short int": 2, "signed char": 1, "unsigned char": 1, "bool": 1,
               "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1}  # fmt: skip


def looks_like(head: bytes) -> bool:
    return bool(_START.match(head)) and (b'"traceEvents"' in head or b'"distributedInfo"' in head)


def _document(content: bytes | memoryview, file_name: str) -> dict:
    try:
        document = json_input.loads(bytes(content))
    except UnicodeDecodeError as error:
        raise ResultFileError(f"{file_name}: byte {error.start} is not UTF-8: not a profiler trace") from None
    except json.JSONDecodeError as error:
        ended = error.msg.startswith("Unterminated") or error.pos >= len(bytes(content).rstrip()) - 1
        cut = " (the trace is cut short)" if ended else ""
        raise ResultFileError(
            f"{file_name}: line {error.lineno} column {error.colno}: not valid JSON: {error.msg}{cut}"
        ) from None
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        raise ResultFileError(f"{file_name}: no traceEvents list: not a PyTorch profiler trace")
    return document


def _process_group(info: dict, file_name: str) -> tuple[str, int | None, list[str], list[str]]:
    """(communicator, its size, its members, warnings) for gloo's calls (see the module's docstring)."""
    groups = info.get("pg_config")
    if not isinstance(groups, list) or not groups or not all(isinstance(g, dict) for g in groups):
        raise ResultFileError(f"{file_name}: distributedInfo has no pg_config list")
    if len(groups) == 1:
        group = groups[0]
        members = [str(rank) for rank in group.get("ranks", []) if isinstance(rank, int)]
        return f"pg {group.get('pg_name')} ({group.get('pg_desc')})", group.get("pg_size"), members, []
    sizes = {group.get("pg_size") for group in groups}
    size = sizes.pop() if len(sizes) == 1 else None
    warning = (
        f"{file_name}: {len(groups)} process groups, and gloo's events do not say which ran a call: "
        "their calls are counted together"
    )
    return "gloo (process group not recorded)", size, [], [warning]


def _whole_bytes(op: CollectiveOp | None, elements: int, element_bytes: int, group_size: int | None) -> int:
    piece = elements * element_bytes
    return piece * group_size if op is CollectiveOp.ALL_GATHER and group_size else piece


def file_calls(content: bytes | memoryview, file_name: str) -> FileCalls:
    document = _document(content, file_name)
    info = document.get("distributedInfo")
    if not isinstance(info, dict) or not isinstance(info.get("rank"), int):
        raise ResultFileError(f"{file_name}: no distributedInfo with a rank: not a trace of a torch.distributed job")
    rank = str(info["rank"])
    host = document.get("host_name") if isinstance(document.get("host_name"), str) else ""
    communicator, group_size, members, warnings = _process_group(info, file_name)
    steps: list[tuple[float, float, int]] = []
    found = []
    for index, event in enumerate(document["traceEvents"]):
        where = f"{file_name}: traceEvents[{index}]"
        if not isinstance(event, dict):
            raise ResultFileError(f"{where}: not an object")
        name = event.get("name")
        if event.get("ph") != "X" or not isinstance(name, str):
            continue
        step = _STEP.match(name)
        if step is None and not name.startswith(GLOO_PREFIX):
            continue
        start, duration = event.get("ts"), event.get("dur")
        if not all(isinstance(v, int | float) and math.isfinite(v) for v in (start, duration)) or duration < 0:
            raise ResultFileError(f"{where}: {name} has no finite ts and dur")
        if step is not None:
            steps.append((start, start + duration, int(step.group(1))))
            continue
        op_name = name.removeprefix(GLOO_PREFIX)
        if op_name in _SKIPPED:
            continue
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        dims, types = args.get("Input Dims"), args.get("Input type")
        if not (isinstance(dims, list) and dims and isinstance(dims[0], list) and isinstance(types, list) and types):
            raise ResultFileError(f"{where}: {name} has no Input Dims and Input type (profile with record_shapes=True)")
        if not all(isinstance(d, int) and d >= 0 for d in dims[0]):
            raise ResultFileError(f"{where}: {name} has Input Dims {dims[0]!r}")
        element_bytes = _TYPE_BYTES.get(types[0])
        if element_bytes is None:
            raise ResultFileError(f"{where}: {name} has an input of type {types[0]!r}, whose size is not known")
        elements = math.prod(dims[0])
        op = normalise_op_name(op_name)
        found.append((where, start, float(duration), collective_of(op_name), elements, types[0],
                      _whole_bytes(op, elements, element_bytes, group_size)))  # fmt: skip
    if not found:
        raise ResultFileError(
            f"{file_name}: no gloo:* collective in the trace (traces of the NCCL backend are not read yet)"
        )
    occurrences: Counter = Counter()
    calls = []
    for where, start, duration, collective, elements, dtype, size in sorted(found, key=lambda item: item[1]):
        occurrences[(collective, size)] += 1
        calls.append(
            RankCall(
                communicator=communicator,
                group_size=group_size,
                collective=collective,
                size_bytes=size,
                call_key=(collective, size, occurrences[(collective, size)]),
                rank=rank,
                host=host,
                duration_us=duration,
                start_us=float(start),
                step=next((number for low, high, number in steps if low <= start <= high), None),
                where=where,
                dtype=dtype,
                elements=elements,
            )
        )
    return FileCalls(
        file_name=file_name,
        calls=calls,
        members={communicator: set(members)} if members else {},
        steps={number for _, _, number in steps},
        warnings=warnings,
    )
