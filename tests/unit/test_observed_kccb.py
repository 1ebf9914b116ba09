"""A KCCB trial from reality: the constructed NCCL Inspector dump (one 2-rank communicator on hosts gpu-a and
gpu-b: three AllReduce of 1 MiB, one AllGather of 64 KiB per rank) replayed as KCCB trials, in the plans' formats."""

import json

import pytest
import yaml

from emuplan.results.analysis.observed_kccb import ObservedExportError, export_observed_kccb, observed_kccb_trials
from emuplan.results.analysis.plan_vs_observed import ObservedComparisonError
from emuplan.results.budget import ImportBudget
from emuplan.results.formats.observed import parse_observed
from paths import FIXTURES

DUMP = [
    FIXTURES / "results" / "nccl-inspector" / name
    for name in ("constructed-gpu-a-pid101.log", "constructed-gpu-b-pid202.log")
]


@pytest.fixture(scope="module")
def observed() -> dict:
    files = [(path.name, path.read_bytes()) for path in DUMP]
    with ImportBudget() as budget:
        return parse_observed(files, budget=budget).observed


def test_a_dump_over_three_steps_is_a_trial_per_collective_with_the_jobs_calls_per_step(observed: dict) -> None:
    trials, skipped = observed_kccb_trials(observed, steps=3)
    assert skipped == []
    assert [trial.model_dump(mode="json") for trial in trials] == [
        {
            "algorithm": "ALGO_ALL_REDUCE_UNIDIRECTIONAL_RING",
            "algorithm_id": 10,
            "collective": "all_reduce",
            "data_sizes": [1048576],
            "iterations": 3,
            "hosts": 2,
            "gpus_per_host": 1,
            "parallel_dim": None,
            "group_size": 2,
            "note": "replays a training job: group of 2 ranks (1 communicator: 0xc0ffee); data sizes are the whole "
            "buffer; calls per training step (per communicator, over 3 steps): 1 of 1048576 B",
        },
        {
            # The whole buffer of 131072 B as KCCB takes an all-gather: one rank's piece.
            "algorithm": "ALGO_ALL_GATHER_RING",
            "algorithm_id": 20,
            "collective": "all_gather",
            "data_sizes": [65536],
            "iterations": 3,
            "hosts": 2,
            "gpus_per_host": 1,
            "parallel_dim": None,
            "group_size": 2,
            "note": "replays a training job: group of 2 ranks (1 communicator: 0xc0ffee); data sizes are the per-rank "
            "piece (whole buffer / group size); calls per training step (per communicator, over 3 steps): 0.333333 of "
            "65536 B",
        },
    ]


def test_the_export_has_the_plans_formats(observed: dict) -> None:
    document = yaml.safe_load(export_observed_kccb(7, "job", observed, "yaml", 3))
    assert [trial["name"] for trial in document["trials"]] == ["job all_reduce group2", "job all_gather group2"]
    assert document["trials"][1]["benchmark"] == {
        "collective_algorithm": "ALGO_ALL_GATHER_RING",
        "datasize_list": {"size_bytes": [65536]},
        "iterations": 3,
    }
    assert document["trials"][1]["infrastructure"] == {
        "host": {"count": 2, "generic": {"npu_count": 1}},
        "rocev2": {"qps_per_rankpair": 1},
    }
    assert [trial["data_sizes"] for trial in json.loads(export_observed_kccb(7, "job", observed, "json", 3))] == [
        [1048576],
        [65536],
    ]
    assert export_observed_kccb(7, "job", observed, "text", 3) == (
        "# trial 1: ALGO_ALL_REDUCE_UNIDIRECTIONAL_RING (10), iterations 3, 2 hosts x 1 GPU per host\n1048576\n\n"
        "# trial 2: ALGO_ALL_GATHER_RING (20), iterations 3, 2 hosts x 1 GPU per host\n65536\n"
    )


def test_what_kccb_cannot_replay_heads_the_export(observed: dict) -> None:
    reduced = {**observed, "groups": [{**observed["groups"][0], "collective": "reduce"}, *observed["groups"][1:]]}
    assert export_observed_kccb(7, "job", reduced, "text", 3) == (
        "# not replayed: reduce of 1048576 B on 0xc0ffee: KCCB has no algorithm for it\n"
        "# trial 1: ALGO_ALL_GATHER_RING (20), iterations 3, 2 hosts x 1 GPU per host\n65536\n"
    )
    nothing = {**observed, "groups": [{**group, "collective": "reduce"} for group in observed["groups"]]}
    with pytest.raises(ObservedExportError, match=r"^run 7: nothing KCCB can replay \(reduce of 1048576 B on "):
        export_observed_kccb(7, "job", nothing, "yaml", 3)


def test_a_run_that_was_not_observed_or_spans_no_steps_gives_no_trial(observed: dict) -> None:
    with pytest.raises(ObservedExportError, match="^run 7 is not an observed run"):
        export_observed_kccb(7, "job", None, "yaml", None)
    with pytest.raises(ObservedComparisonError, match="records no training steps"):
        export_observed_kccb(7, "job", observed, "yaml", None)
