"""Tutorial mode reproduces the seed notebooks exactly; trials, validation and the KCCB exports."""

import json

import pytest
import yaml

from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import PlanningError, PlanRequest
from emuplan.workload.kccb import export_kccb
from emuplan.workload.planner import plan_workload
from emuplan.workload.sources import resolve_model
from emuplan.workload.trials import count_trials

SEED = "fashion-mnist-mlp"


def seed_plan(**options):
    return plan_workload(PlanRequest(model=SEED, **options), resolve_model(SEED))


def test_seed_data_parallel() -> None:
    document = seed_plan(strategy="data")
    assert document.mode.value == "tutorial"
    assert document.trials == 8
    assert document.kccb.model_dump(
        include={"algorithm", "algorithm_id", "data_sizes", "iterations", "hosts", "gpus_per_host", "collective"}
    ) == {  # fmt: skip
        "algorithm": "ALGO_ALL_REDUCE_UNIDIRECTIONAL_RING",
        "algorithm_id": 10,
        "data_sizes": [971048],
        "iterations": 8,
        "hosts": 4,
        "gpus_per_host": 1,
        "collective": CollectiveOp.ALL_REDUCE,
    }
    assert document.model.parameter_bytes == 971048


def test_seed_tensor_parallel_uses_the_per_rank_piece() -> None:
    document = seed_plan(strategy="tensor", gpus=4)
    assert document.kccb.algorithm == "ALGO_ALL_GATHER_RING"
    assert document.kccb.algorithm_id == 20
    assert document.kccb.data_sizes == [6438912]
    (gather,) = document.collectives
    assert (gather.bytes_per_rank, gather.bytes_total) == (6438912, 4 * 6438912)
    assert (document.kccb.hosts, document.kccb.gpus_per_host, document.trials) == (4, 1, 8)
    assert any("per-rank piece is KCCB's data size" in note for note in document.notes)


def test_seed_pipeline_lists_layer_gradients_last_layer_first() -> None:
    document = seed_plan(strategy="pipeline")
    assert document.kccb.algorithm == "ALGO_ALL_REDUCE_UNIDIRECTIONAL_RING"
    assert document.kccb.data_sizes == [2600, 33024, 131584, 803840]
    assert [c.label for c in document.collectives] == ["fc4 gradient", "fc3 gradient", "fc2 gradient", "fc1 gradient"]
    assert (document.trials, document.kccb.hosts, document.kccb.gpus_per_host) == (8, 4, 1)
    assert document.kccb_trials == 1


def test_ideal_time_follows_the_alpha_beta_ring_model() -> None:
    document = seed_plan(strategy="data", link_gbps=100, latency_us=5)
    # 2(n−1)α + 2(n−1)/n · S/B with n = 4, S = 971048 B, B = 12.5e9 B/s
    assert document.collectives[0].ideal_time_us == pytest.approx(6 * 5 + 1.5 * 971048 / 12.5e9 * 1e6)


@pytest.mark.parametrize(
    ("dataset", "batch", "epochs", "drop_last", "trials"),
    [(60000, 8192, 1, False, 8), (60000, 8192, 1, True, 7), (60000, 8192, 3, False, 24), (8192, 8192, 1, True, 1)],
)
def test_trials_are_batches_times_epochs(dataset, batch, epochs, drop_last, trials) -> None:
    assert count_trials(dataset, batch, epochs, drop_last) == trials
    document = seed_plan(dataset_size=dataset, batch_size=batch, epochs=epochs, drop_last=drop_last)
    assert document.trials == document.kccb.iterations == trials


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"batch_size": 0}, r"^batch_size: must be at least 1, got 0$"),
        ({"strategy": "hybrid", "gpus": 6, "tp": 4}, r"^gpus: 6 GPUs are not divisible by tp × pp = 4 × 1 = 4$"),
        ({"gpus": 4, "hosts": 3}, r"^hosts: 4 GPUs cannot be spread evenly over 3 hosts$"),
        ({"strategy": "hybrid", "gpus": 8, "tp": 2, "dp": 2}, r"^dp: dp × tp × pp = 2 × 2 × 1 = 4, but gpus = 8$"),
        ({"dataset_size": 100, "batch_size": 200, "drop_last": True}, r"^batch_size: 200 is larger than dataset_size"),
        ({"param_dtype": "float13"}, r"^param_dtype: unknown dtype 'float13'"),
        ({"strategy": "hybrid"}, r"^mode: the tutorial rules cover data, tensor and pipeline only; framework mode "),
        # Which a page cannot show as a silent data-parallel plan (tp 1 left over from a saved data plan):
        (
            {"strategy": "tensor", "tp": 1},
            r"^tp: the tensor strategy needs a tensor-parallel degree of at least 2, got 1$",
        ),
        ({"strategy": "pipeline", "pp": 1}, r"^pp: the pipeline strategy needs at least 2 stages, got 1$"),
        (
            {"strategy": "tensor", "mode": "framework", "gpus": 6, "tp": 4},
            r"^gpus: 6 GPUs are not divisible by tp × pp",
        ),
        ({"mode": "framework", "gpus": 1}, r"^gpus: one GPU exchanges nothing"),
        ({"mode": "framework", "strategy": "pipeline", "pp": 5, "gpus": 5}, r"^pp: 5 pipeline stages but the model"),
        # Each degree is bounded by the request model (2^20); their product by the planner.
        ({"dp": 1 << 20, "tp": 2}, r"^gpus: 2097152 GPUs is more than the planner accepts"),
    ],
)
def test_bad_inputs_name_the_field(options: dict, message: str) -> None:
    with pytest.raises(PlanningError, match=message):
        seed_plan(**options)


def test_sequence_longer_than_the_model_allows_is_rejected() -> None:
    with pytest.raises(PlanningError, match=r"^seq_len: 8192 exceeds the model's max_position_embeddings 4096$"):
        plan_workload(PlanRequest(model="llama-2-7b", seq_len=8192), resolve_model("llama-2-7b"))


def test_kccb_yaml_is_shaped_like_kais_trial_config() -> None:
    document = seed_plan(strategy="pipeline")
    (trial,) = yaml.safe_load(export_kccb(document, "yaml"))["trials"]
    assert trial["benchmark"] == {
        "collective_algorithm": "ALGO_ALL_REDUCE_UNIDIRECTIONAL_RING",
        "datasize_list": {"size_bytes": [2600, 33024, 131584, 803840]},
        "iterations": 8,
    }
    assert trial["infrastructure"]["host"] == {"count": 4, "generic": {"npu_count": 1}}


def test_kccb_json_and_text_exports() -> None:
    document = seed_plan(strategy="tensor")
    assert [t["data_sizes"] for t in json.loads(export_kccb(document, "json"))] == [[6438912]]
    assert export_kccb(document, "text") == (
        "# trial 1: ALGO_ALL_GATHER_RING (20), iterations 8, 4 hosts x 1 GPU per host\n6438912\n"
    )
    with pytest.raises(ValueError, match=r"^format: unknown KCCB export format 'xml'"):
        export_kccb(document, "xml")


def test_several_collective_kinds_give_a_kccb_list() -> None:
    document = seed_plan(strategy="data", mode="framework", dp_impl="fsdp2")
    assert isinstance(document.kccb, list)
    assert document.kccb_trials == len(document.kccb) == 2
    assert len(yaml.safe_load(export_kccb(document, "yaml"))["trials"]) == 2
