"""The seed tutorials' rules: what a notebook user reads off the tensors by hand.

data: one ring all-reduce of all gradient bytes; tensor: one ring all-gather of (input batch +
labels) / GPUs; pipeline: one ring all-reduce per layer's gradient, last layer first. All over
every GPU. A teaching simplification: the framework rules say what PyTorch really sends.
"""

from math import prod

from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import NormalisedInputs, ParallelDim, Phase, PlannedCollective, PlanningError
from emuplan.workload.inventory import ModelInventory, dtype_bytes
from emuplan.workload.plan_options import Strategy
from emuplan.workload.strategies.common import collective, numel_bytes, parameter_units


def tutorial_collectives(inventory: ModelInventory, inputs: NormalisedInputs) -> list[PlannedCollective]:
    gpus, grad_dtype = inputs.gpus, inputs.grad_dtype
    if inputs.strategy is Strategy.DATA:
        total = numel_bytes(inventory.parameter_count, grad_dtype)
        return [
            collective(
                CollectiveOp.ALL_REDUCE, total, gpus, grad_dtype, Phase.BACKWARD, ParallelDim.DP, "all gradients"
            )
        ]
    if inputs.strategy is Strategy.TENSOR:
        return [_tutorial_tensor(inventory, inputs)]
    if inputs.strategy is Strategy.PIPELINE:
        return [
            collective(
                CollectiveOp.ALL_REDUCE,
                numel_bytes(unit.numel, grad_dtype),
                gpus,
                grad_dtype,
                Phase.BACKWARD,
                ParallelDim.PP,
                f"{unit.name} gradient",
            )
            for unit in reversed(parameter_units(inventory))
        ]
    raise PlanningError(
        f"mode: the tutorial rules cover data, tensor and pipeline only; framework mode plans {inputs.strategy.value}"
    )


def _tutorial_tensor(inventory: ModelInventory, inputs: NormalisedInputs) -> PlannedCollective:
    sample = inventory.sample
    if sample is None:
        raise PlanningError(f"model: {inventory.name} does not describe its input sample; tensor tutorial needs it")
    shape = [inputs.seq_len] if inventory.transformer is not None and inputs.seq_len else sample.shape
    label_shape = [inputs.seq_len] if inventory.transformer is not None and inputs.seq_len else sample.label_shape
    batch = inputs.batch_size
    batch_bytes = batch * prod(shape) * dtype_bytes(sample.dtype) + batch * prod(label_shape) * dtype_bytes(
        sample.label_dtype
    )
    piece = -(-batch_bytes // inputs.gpus)
    return collective(
        CollectiveOp.ALL_GATHER,
        piece * inputs.gpus,
        inputs.gpus,
        sample.dtype,
        Phase.FORWARD,
        ParallelDim.TP,
        "input batch + labels",
    )
