"""A profiler trace's calls put in the step they were issued in (one sweep, not every step tried per call), and a
trace of more events than EMUPLAN_MAX_TRACE_EVENTS refused with 413 naming the file."""

import gc
import json

import pytest

from emuplan import json_input
from emuplan.results.budget import ImportBudget, ImportLimits
from emuplan.results.canonical import ResultFileTooLarge
from emuplan.results.formats import pytorch_profiler
from emuplan.results.formats.observed import parse_observed


def step(number: int, ts: float, dur: float) -> dict:
    return {"ph": "X", "name": f"ProfilerStep#{number}", "ts": ts, "dur": dur}


def gloo_call(ts: float, elements: int) -> dict:
    args = {"Input Dims": [[elements]], "Input type": ["float"]}
    return {"ph": "X", "cat": "cpu_op", "name": "gloo:broadcast", "ts": ts, "dur": 5.0, "args": args}


def trace(events: list[dict], rank: int = 0) -> bytes:
    info = {"backend": "gloo", "rank": rank, "world_size": 1, "pg_config": [{"pg_name": "0", "pg_size": 1}]}
    return json.dumps({"distributedInfo": info, "traceEvents": events}).encode()


def test_each_call_is_in_the_step_it_was_issued_in_ends_included_and_the_first_listed_wins() -> None:
    events = [
        step(2, 200.0, 100.0),  # listed before step 1, later in time
        step(1, 100.0, 100.0),  # ends where step 2 begins
        step(3, 250.0, 100.0),  # overlaps step 2: a malformed trace, still read
        gloo_call(50.0, 1),  # before every step
        gloo_call(100.0, 2),  # at step 1's start
        gloo_call(200.0, 3),  # at the end of step 1 and the start of step 2: step 2 is listed first
        gloo_call(260.0, 4),  # in steps 2 and 3: step 2 is listed first
        gloo_call(320.0, 5),  # past step 2, in step 3
        gloo_call(400.0, 6),  # after every step
    ]
    with ImportBudget() as budget:
        parsed = parse_observed([("rank0.json", trace(events))], budget=budget)
    # Each call has a size of its own, so its group's calls in steps say whether it fell in one.
    groups = {group["size_bytes"] // 4: group["calls_in_steps"] for group in parsed.observed["groups"]}
    assert groups == {1: 0, 2: 1, 3: 1, 4: 1, 5: 1, 6: 0}
    assert parsed.observed["steps"] == [1, 2, 3]


def test_the_step_numbers_of_calls_are_those_of_the_step_they_fall_in() -> None:
    events = [
        step(2, 200.0, 100.0),
        step(1, 100.0, 100.0),
        step(3, 250.0, 100.0),
        *(gloo_call(ts, n) for n, ts in enumerate((50.0, 100.0, 200.0, 260.0, 320.0, 400.0), start=1)),
    ]
    calls = pytorch_profiler.trace_calls(trace(events), "rank0.json", max_events=len(events)).calls
    assert [(call.elements, call.step) for call in calls] == [(1, None), (2, 1), (3, 2), (4, 2), (5, 3), (6, None)]


def test_a_trace_of_more_events_than_the_cap_is_refused_naming_it() -> None:
    events = [step(1, 0.0, 100.0), gloo_call(10.0, 8), gloo_call(20.0, 8), gloo_call(30.0, 8)]
    with ImportBudget(ImportLimits(max_trace_events=3)) as budget, pytest.raises(ResultFileTooLarge) as refused:
        parse_observed([("job.zip/rank0.json", trace(events))], budget=budget)
    assert str(refused.value) == (
        "job.zip/rank0.json: 4 traceEvents, more than the 3 a trace may hold (EMUPLAN_MAX_TRACE_EVENTS); "
        "profile fewer steps (torch.profiler.schedule's active)"
    )
    with ImportBudget(ImportLimits(max_trace_events=4)) as budget:
        assert parse_observed([("rank0.json", trace(events))], budget=budget).observed["steps"] == [1]


def test_the_cyclic_collector_is_paused_while_a_trace_is_read_and_on_again_after_even_a_refusal() -> None:
    assert gc.isenabled()
    with json_input.collection_paused():
        assert not gc.isenabled()
        with json_input.collection_paused():  # a second import's trace at the same time
            assert not gc.isenabled()
        assert not gc.isenabled()  # the first is still being read
    assert gc.isenabled()
    with pytest.raises(ResultFileTooLarge):
        pytorch_profiler.trace_calls(trace([step(1, 0.0, 1.0)] * 2), "rank0.json", max_events=1)
    assert gc.isenabled()
    gc.disable()
    try:
        with json_input.collection_paused():
            pass
        assert not gc.isenabled()  # off before, left off
    finally:
        gc.enable()
