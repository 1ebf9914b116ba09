"""Tensor-parallel traffic: DTensor Colwise/Rowwise on plain Linear stacks, Megatron on transformers.

DTensor (``parallelize_module`` with ColwiseParallel and RowwiseParallel alternating, the
tutorial's pairing): a row-wise layer all-reduces its output (b × out) in forward; a column-wise
layer all-reduces its input's gradient (b × in) in backward, unless its input is the data (the first
layer). An odd last layer is column-wise with a replicated output: one all-gather of b × out.

Megatron (per transformer layer per micro-batch): attention and MLP each have a column-parallel
then a row-parallel linear, so 2 all-reduces of b·s·h in forward (after the row-parallel outputs)
and 2 in backward (the column-parallel inputs' gradients). Sequence parallel replaces each forward
all-reduce by a reduce-scatter and adds an all-gather before each column-parallel linear; in
backward the column-parallel input is all-gathered again for the weight gradient, its gradient
reduce-scattered, and the row-parallel output gradient all-gathered. The vocab-parallel embedding
all-reduces (SP: reduce-scatters) its output; the column-parallel LM head all-reduces its input
gradient; vocab-parallel cross-entropy adds 3 fp32 all-reduces of b·s (max logit, target logit,
sum of exponentials).
"""

from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import ParallelDim, Phase, PlannedCollective
from emuplan.workload.inventory import ParameterInfo
from emuplan.workload.strategies.common import collective, numel_bytes

AR, AG, RS = CollectiveOp.ALL_REDUCE, CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER
TP = ParallelDim.TP


def linear_layers(parameters: list[ParameterInfo]) -> list[tuple[str, int, int]]:
    """(module, in_features, out_features) of every 2-D ``*.weight`` in registration order."""
    return [
        (p.name.removesuffix(".weight"), p.shape[1], p.shape[0])
        for p in parameters
        if p.name.endswith("weight") and len(p.shape) == 2
    ]


def dtensor_linear_collectives(
    layers: list[tuple[str, int, int]],
    batch: int,
    tp: int,
    dtype: str,
    micro_batches: int,
    input_requires_grad: bool = False,
) -> list[PlannedCollective]:
    forward, backward = [], []
    for index, (module, in_features, out_features) in enumerate(layers):
        colwise = index % 2 == 0
        if colwise and index == len(layers) - 1:
            forward.append(
                collective(
                    AG,
                    numel_bytes(batch * out_features, dtype),
                    tp,
                    dtype,
                    Phase.FORWARD,
                    TP,
                    f"{module} output (ColwiseParallel, replicated)",
                    micro_batches,
                )
            )
        if not colwise:
            forward.append(
                collective(
                    AR,
                    numel_bytes(batch * out_features, dtype),
                    tp,
                    dtype,
                    Phase.FORWARD,
                    TP,
                    f"{module} output (RowwiseParallel)",
                    micro_batches,
                )
            )
        if colwise and (index > 0 or input_requires_grad):
            backward.append(
                collective(
                    AR,
                    numel_bytes(batch * in_features, dtype),
                    tp,
                    dtype,
                    Phase.BACKWARD,
                    TP,
                    f"{module} input gradient (ColwiseParallel)",
                    micro_batches,
                )
            )
    return forward + list(reversed(backward))


def megatron_collectives(
    hidden: int,
    vocab: int,
    tokens: int,
    tp: int,
    dtype: str,
    layers: int,
    micro_batches: int,
    sequence_parallel: bool,
    has_embedding: bool,
    has_head: bool,
    vocab_parallel_loss: bool,
) -> list[PlannedCollective]:
    """Collectives of one pipeline stage holding ``layers`` layers; ``tokens`` = micro-batch × seq."""
    activation = numel_bytes(tokens * hidden, dtype)
    per_layer = 2 * layers * micro_batches

    def item(op, phase, label, count, size=activation, item_dtype=dtype):
        return collective(op, size, tp, item_dtype, phase, TP, label, count)

    forward, backward = [], []
    if has_embedding:
        forward.append(
            item(RS if sequence_parallel else AR, Phase.FORWARD, "vocab-parallel embedding output", micro_batches)
        )
    if layers:
        if sequence_parallel:
            forward += [
                item(AG, Phase.FORWARD, "sequence-parallel input of QKV / MLP up (per layer ×2)", per_layer),
                item(RS, Phase.FORWARD, "attention / MLP output (per layer ×2)", per_layer),
            ]
            backward += [
                item(AG, Phase.BACKWARD, "row-parallel output gradient (per layer ×2)", per_layer),
                item(
                    AG,
                    Phase.BACKWARD,
                    "column-parallel input re-gathered for weight gradient (per layer ×2)",
                    per_layer,
                ),
                item(RS, Phase.BACKWARD, "column-parallel input gradient (per layer ×2)", per_layer),
            ]
        else:
            forward.append(item(AR, Phase.FORWARD, "attention / MLP row-parallel output (per layer ×2)", per_layer))
            backward.append(item(AR, Phase.BACKWARD, "QKV / MLP-up input gradient (per layer ×2)", per_layer))
    if has_head:
        if sequence_parallel:
            forward.append(item(AG, Phase.FORWARD, "LM head input (sequence-parallel)", micro_batches))
            backward.append(item(RS, Phase.BACKWARD, "LM head input gradient", micro_batches))
        else:
            backward.insert(0, item(AR, Phase.BACKWARD, "LM head input gradient", micro_batches))
        if vocab_parallel_loss:
            forward.append(
                item(
                    AR,
                    Phase.FORWARD,
                    "vocab-parallel cross-entropy (max, target logit, sum exp)",
                    3 * micro_batches,
                    size=numel_bytes(tokens, "float32"),
                    item_dtype="float32",
                )
            )
        else:
            forward.append(
                item(
                    AG, Phase.FORWARD, "LM head logits gathered", micro_batches, size=numel_bytes(tokens * vocab, dtype)
                )
            )
    return forward + backward


_COLUMN_PARALLEL = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "embed_tokens", "lm_head", "wte")
_ROW_PARALLEL = ("o_proj", "down_proj")
_CONV1D_COLUMN = ("c_attn", "c_fc")  # GPT-2 Conv1D weights are [in, out]


def megatron_shard(param: ParameterInfo, tp: int) -> ParameterInfo:
    """The local piece a TP rank holds: column-parallel splits outputs, row-parallel inputs."""
    parts = param.name.split(".")
    module, kind = (parts[-2] if len(parts) > 1 else ""), parts[-1]
    shape = list(param.shape)
    if module in _COLUMN_PARALLEL:
        dim = 0
    elif module in _ROW_PARALLEL and kind == "weight":
        dim = 1
    elif module in _CONV1D_COLUMN:
        dim = len(shape) - 1
    elif module == "c_proj" and kind == "weight":
        dim = 0
    else:
        return param  # norms, row-parallel biases and position embeddings are replicated
    shape[dim] = -(-shape[dim] // tp)
    return param.model_copy(update={"shape": shape})


def dtensor_shard(param: ParameterInfo, layer_index: int, tp: int) -> ParameterInfo:
    """ColwiseParallel (even layers) shards weight and bias on dim 0; RowwiseParallel the weight on dim 1."""
    shape = list(param.shape)
    if layer_index % 2 == 0:
        shape[0] = -(-shape[0] // tp)
    elif len(shape) == 2:
        shape[1] = -(-shape[1] // tp)
    return param.model_copy(update={"shape": shape})
