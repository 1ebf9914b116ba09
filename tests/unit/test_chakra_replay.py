"""Every plan the planner accepts exports a bundle a simulator can finish: no cycles, every dependency
present, communicators issuing the same collectives in the same order, every send meeting its receive,
and a replay on ASTRA-sim's issue rules (``chakra_replay``) that ends."""

from pathlib import Path

import pytest
from chakra_replay import Bundle, check_bundle

from emuplan.workload.chakra import et_def_pb2 as et
from emuplan.workload.chakra.bundle import attribute, bundle_files
from emuplan.workload.chakra.schedule import ComputeModel, build_traces
from emuplan.workload.document import PlanRequest
from emuplan.workload.planner import plan_workload
from emuplan.workload.pytorch_source import PytorchSourceOptions
from emuplan.workload.sources import resolve_model

SEED_SOURCE = str(Path(__file__).parents[1] / "fixtures" / "models" / "seed_classifier.py")
FRAMEWORK = {"mode": "framework"}
GPT2 = {"model": "gpt2", "batch_size": 8, "seq_len": 1024}
MIXTRAL = {"model": "mixtral-8x7b", "mode": "framework", "seq_len": 1024}

PLANS = {
    "mlp data ddp": {"model": "fashion-mnist-mlp", **FRAMEWORK, "gpus": 4},
    "mlp tensor": {"model": "fashion-mnist-mlp", **FRAMEWORK, "strategy": "tensor", "gpus": 4},
    "mlp pipeline mb4": {"model": "fashion-mnist-mlp", **FRAMEWORK, "strategy": "pipeline", "gpus": 2,
                         "micro_batches": 4},
    "gpt2 data ddp": {**GPT2, "gpus": 4},
    "gpt2 tensor sp": {**GPT2, "strategy": "tensor", "gpus": 4, "sequence_parallel": True},
    "gpt2 pipeline mb1": {**GPT2, "strategy": "pipeline", "gpus": 4, "micro_batches": 1},
    "gpt2 hybrid mb4": {**GPT2, "strategy": "hybrid", "tp": 2, "pp": 2, "dp": 2, "micro_batches": 4},
    "gpt2 hybrid sp mb8": {**GPT2, "strategy": "hybrid", "tp": 2, "pp": 2, "dp": 2, "micro_batches": 8,
                           "sequence_parallel": True},
    "mixtral ep8": {**MIXTRAL, "gpus": 8, "ep": 8, "batch_size": 8},
    "mixtral ep2 pp2 mb4": {**MIXTRAL, "strategy": "hybrid", "pp": 2, "dp": 4, "ep": 2, "batch_size": 8,
                            "micro_batches": 4},
}  # fmt: skip


def export(request: dict, inventory=None) -> dict[str, bytes]:
    inventory = inventory or resolve_model(request["model"])
    document = plan_workload(PlanRequest(**request), inventory)
    return bundle_files(document, build_traces(document, inventory, ComputeModel.from_options()), "a test plan")


@pytest.mark.parametrize("request_fields", PLANS.values(), ids=PLANS.keys())
def test_every_plan_replays_to_the_end(request_fields: dict) -> None:
    assert check_bundle(export(request_fields)) > 0


def test_a_pytorch_source_replays_to_the_end() -> None:
    options = PytorchSourceOptions(model_class="Classifier", input_shape=[1, 28, 28])
    inventory = resolve_model(SEED_SOURCE, pytorch_options=options)
    assert check_bundle(export({"model": SEED_SOURCE, **FRAMEWORK, "gpus": 4}, inventory)) > 0


def test_reduce_scatter_carries_its_whole_input_and_all_gather_one_piece() -> None:
    """GPT-2 sequence parallel over 4 ranks: each layer half's output, 1 × 1024 tokens × 768 × 2 bytes,
    is reduce-scattered (comm_size the whole 1.5 MiB input) and all-gathered (comm_size one rank's quarter)."""
    bundle = Bundle.read(export(PLANS["gpt2 tensor sp"]))
    sizes = {
        (attribute(node, "comm_type"), attribute(node, "comm_size"), attribute(node, "bytes_total"))
        for node in bundle.ranks[0]
        if node.type == et.COMM_COLL_NODE and "transformer.h.0 attention" in node.name
    }
    assert sizes == {(et.ALL_GATHER, 393216, 1572864), (et.REDUCE_SCATTER, 1572864, 1572864)}
