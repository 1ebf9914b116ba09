"""A PyTorch profiler trace as ``export_chrome_trace`` writes one for a gloo rank of a data-parallel job, of any
length, for the benches.

Per training step (``ProfilerStep#N``): 12 CPU ops (forward and backward, ``aten::*``), three gradient buckets
all-reduced (``c10d::allreduce_`` on the calling thread, ``gloo:all_reduce`` on a worker thread, with their
``Input Dims`` and ``Input type`` as ``record_shapes=True`` records them) and one FSDP-style
``c10d::_reduce_scatter_base_`` that gloo runs as an all-reduce of its whole input: 21 events a step. Times in
µs from the profiler's epoch, each step 10 ms, calls a few hundred µs, rank 1 slightly later than rank 0.
"""

import json

EVENTS_PER_STEP = 21
BUCKETS = (4_239_400, 2_109_440, 1_048_576)  # elements of each bucket's all-reduce
SCATTERED = 2_101_248  # the reduce-scatter's input, elements
OPS = ("aten::linear", "aten::relu", "aten::mm", "aten::add_", "aten::mul", "aten::sum")


def event_count(events: int) -> int:
    """The events of a trace asked for ``events``: whole steps of ``EVENTS_PER_STEP``, one at least."""
    return max(1, events // EVENTS_PER_STEP) * EVENTS_PER_STEP


def trace_document(events: int, rank: int = 0, world_size: int = 2) -> dict:
    """``event_count(events)`` trace events of one rank."""
    trace: list[dict] = []
    offset = 7.0 * rank

    def op(name: str, ts: float, dur: float, tid: int, args: dict | None = None) -> None:
        event = {"ph": "X", "cat": "cpu_op", "name": name, "pid": 4242 + rank, "tid": tid, "ts": ts, "dur": dur}
        if args is not None:
            event["args"] = args
        trace.append(event)

    for step in range(event_count(events) // EVENTS_PER_STEP):
        start = 1_000_000.0 + step * 10_000.0 + offset
        op(f"ProfilerStep#{step}", start, 9_800.0, 1)
        for index in range(12):
            op(OPS[index % len(OPS)], start + 20.0 + index * 300.0, 250.0, 1, {"External id": step * 100 + index})
        at = start + 4_000.0
        for elements in BUCKETS:
            op("c10d::allreduce_", at, 40.0, 1, {"Input Dims": [[[elements]], []], "Input type": ["TensorList"]})
            op("gloo:all_reduce", at + 30.0, 400.0 + elements / 20_000, 2,
               {"Input Dims": [[elements]], "Input type": ["float"]})  # fmt: skip
            at += 900.0
        op("c10d::_reduce_scatter_base_", at, 40.0, 1,
           {"Input Dims": [[SCATTERED // world_size], [SCATTERED]], "Input type": ["float", "float"]})  # fmt: skip
        op("gloo:all_reduce", at + 30.0, 380.0, 2, {"Input Dims": [[SCATTERED]], "Input type": ["float"]})
    return {
        "schemaVersion": 1,
        "distributedInfo": {
            "backend": "gloo",
            "rank": rank,
            "world_size": world_size,
            "pg_count": 1,
            "pg_config": [
                {"pg_name": "0", "pg_desc": "default_pg", "pg_size": world_size, "ranks": list(range(world_size))}
            ],  # fmt: skip
        },
        "host_name": "trainer-0",
        "traceEvents": trace,
    }


def trace_files(events: int, world_size: int = 2) -> list[tuple[str, bytes]]:
    """One trace of ``events`` events per rank, as (file name, JSON bytes)."""
    return [
        (f"rank{rank}.pt.trace.json", json.dumps(trace_document(events, rank, world_size)).encode())
        for rank in range(world_size)
    ]
