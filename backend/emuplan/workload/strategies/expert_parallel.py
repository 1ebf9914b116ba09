"""Expert-parallel traffic of a mixture-of-experts transformer (Megatron-core's all-to-all token dispatcher).

Rank layout: the ``ep`` ranks of an expert-parallel group are consecutive data-parallel replicas (ranks
tp·pp apart), as Megatron and DeepSpeed carve EP from DP; each holds ``num_experts / ep`` of every MoE
layer's routed experts. Router, shared experts and attention stay replicated over EP.

Per MoE layer and micro-batch each rank sends its tokens' ``top_k`` copies to the experts' ranks
(dispatch) and receives them back (combine): two all-to-alls forward, and their two mirrors backward.
Convention: dropless routing with an even load, so each rank's all-to-all buffer holds
tokens × top_k × hidden activations, tokens = micro_batch × seq_len (÷ tp: Megatron runs MoE with
tensor parallelism only under sequence parallelism, each TP rank dispatching its part of the
sequence). ``bytes_total`` is that per-rank buffer, as nccl-tests' alltoall counts it. With a capacity
factor c every expert's share is padded to ceil(c × tokens × top_k / experts) tokens; a hot-expert
factor f sizes the buffer for the busiest rank, which receives f × an even share.

With TP > 1 the experts are split over TP too (Megatron's default expert-tensor-parallel size = tp):
after the dispatch the TP ranks all-gather the tokens routed to them and reduce-scatter the experts'
output before the combine (megatron/core/transformer/moe/token_dispatcher.py); in backward the
reduce-scatter and all-gather swap.

Besides the tokens, the dispatcher (``MoEAlltoAllTokenDispatcher``) sends small collectives per MoE layer and
micro-batch: dropless routing all-gathers every rank's per-expert token counts over the TP×EP group
(``preprocess``), and since Megatron-core 0.12 the routing probabilities travel with their tokens
(``dispatch_all_to_all``, and gathered over TP in ``dispatch_postprocess``), forward and backward.

Expert gradients all-reduce over the expert-data-parallel group (the dp / ep ranks holding the same
experts, ranks ep·tp·pp apart); everything else over the whole data-parallel group.
"""

import typing
from math import ceil

from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import NormalisedInputs, ParallelDim, Phase, PlannedCollective, PlanningError
from emuplan.workload.inventory import ExpertShape, ModelInventory, ParameterInfo, TransformerShape
from emuplan.workload.plan_options import MegatronCore
from emuplan.workload.strategies.common import Unit, collective, numel_bytes

# The routed experts' tensors (transformers stores each layer's experts as two 3-D tensors).
_EXPERT_TENSORS = (".experts.gate_up_proj", ".experts.down_proj")


def is_expert_parameter(param: ParameterInfo) -> bool:
    return param.name.endswith(_EXPERT_TENSORS)


def shard_experts(units: list[Unit], ep: int) -> list[Unit]:
    """The same units with the ``num_experts / ep`` routed experts one EP rank holds."""
    return [
        Unit(
            unit.name,
            tuple(
                p.model_copy(update={"shape": [p.shape[0] // ep, *p.shape[1:]]}) if is_expert_parameter(p) else p
                for p in unit.parameters
            ),
            unit.is_root,
        )
        for unit in units
    ]


def split_expert_units(units: list[Unit]) -> tuple[list[Unit], list[Unit]]:
    """(dense units, expert units): each unit's routed experts' tensors apart from the rest, for the two
    data-parallel groups their gradients reduce over."""
    dense, experts = [], []
    for unit in units:
        routed = tuple(p for p in unit.parameters if is_expert_parameter(p))
        rest = tuple(p for p in unit.parameters if not is_expert_parameter(p))
        if rest:
            dense.append(Unit(unit.name, rest, unit.is_root))
        if routed:
            experts.append(Unit(f"{unit.name} experts", routed, unit.is_root))
    return dense, experts


def moe_layer_count(units: list[Unit]) -> int:
    """The layers among ``units`` that have routed experts."""
    return sum(1 for unit in units if any(is_expert_parameter(p) for p in unit.parameters))


def check_expert_degrees(inventory: ModelInventory, inputs: NormalisedInputs) -> None:
    """Expert parallelism needs experts to split, evenly, over EP ranks carved from DP."""
    shape = inventory.transformer
    if inventory.source_kind == "pytorch":
        # Its experts, if any, are whatever its own forward() routes to; PyTorch has no expert-parallel
        # wrapper (as it has DDP, fully_shard, parallelize_module) to run it under the fake process group.
        raise PlanningError(
            f"ep: {inventory.name} is PyTorch source, whose routing is its own code: PyTorch has no expert-parallel "
            "wrapper to capture it with, so its all-to-alls cannot be planned from it. Plan it with ep 1 (its DDP "
            "and FSDP2 traffic is captured) or describe the model as a config.json with experts"
        )
    if shape is None or shape.experts is None:
        raise PlanningError(
            f"ep: {inventory.name} has no experts the planner knows of; expert parallelism needs a "
            "mixture-of-experts preset or config.json"
        )
    if inputs.dp % inputs.ep:
        raise PlanningError(
            f"ep: expert-parallel groups are carved from the data-parallel ranks, but ep {inputs.ep} does not "
            f"divide dp {inputs.dp}"
        )
    if shape.experts.num_experts % inputs.ep:
        raise PlanningError(
            f"ep: the model's {shape.experts.num_experts} experts per layer cannot be split evenly over "
            f"{inputs.ep} ranks"
        )


def routed_rows(experts: ExpertShape, inputs: NormalisedInputs) -> int:
    """Rows of one rank's dispatch (or combine) buffer for one MoE layer and micro-batch: one per routed copy
    of a token, every expert padded to capacity with a capacity factor, the busiest rank's with a hot expert."""
    tokens = -(-inputs.micro_batch * inputs.seq_len // inputs.tp)
    routed = tokens * experts.experts_per_token
    if inputs.capacity_factor is not None:
        return experts.num_experts * ceil(inputs.capacity_factor * routed / experts.num_experts)
    return round(routed * inputs.hot_expert_factor)


def all_to_all_bytes(experts: ExpertShape, hidden: int, inputs: NormalisedInputs) -> int:
    """One rank's dispatch (or combine) buffer for one MoE layer and micro-batch."""
    return numel_bytes(routed_rows(experts, inputs) * hidden, inputs.activation_dtype)


def token_all_to_alls(shape: TransformerShape, inputs: NormalisedInputs, count: int) -> list[PlannedCollective]:
    """The tokens' EP all-to-alls, [forward, backward], each run ``count`` times a step."""
    size = all_to_all_bytes(shape.experts, shape.hidden_size, inputs)
    return [
        collective(
            CollectiveOp.ALL_TO_ALL,
            size,
            inputs.ep,
            inputs.activation_dtype,
            phase,
            ParallelDim.EP,
            f"MoE token {what} (per MoE layer ×2)",
            count,
        )
        for phase, what in (
            (Phase.FORWARD, "dispatch + combine"),
            (Phase.BACKWARD, "combine + dispatch gradients"),
        )
    ]


class RoutingMetadata(typing.NamedTuple):
    """The dispatcher's small collectives besides the tokens, in megatron/core/transformer/moe/token_dispatcher.py,
    ``MoEAlltoAllTokenDispatcher``: each run ``count`` times a step."""

    # preprocess(): dropless routing all-gathers num_local_tokens_per_expert (num_experts int64) over the
    # tp_ep_group (gather_from_sequence_parallel_region) to size the all-to-alls; integers, so no backward.
    token_counts: list[PlannedCollective]
    # Since Megatron-core 0.12 the routing probabilities travel with their tokens: dispatch_all_to_all() sends
    # permuted_probs (one value per routed row, the router's dtype: the input's by default) over the EP group,
    # and dispatch_postprocess() gathers them over TP; the backward pass mirrors both.
    probs_forward: list[PlannedCollective]
    probs_backward: list[PlannedCollective]


def routing_metadata(shape: TransformerShape, inputs: NormalisedInputs, count: int) -> RoutingMetadata:
    experts, dtype = shape.experts, inputs.activation_dtype
    token_counts = []
    # With a capacity factor Megatron pads every expert to capacity (drop_and_pad): the counts are known.
    if inputs.capacity_factor is None:
        ranks = inputs.tp * inputs.ep
        dim = (
            ParallelDim.TP_EP
            if inputs.tp > 1 and inputs.ep > 1
            else ParallelDim.EP
            if inputs.ep > 1
            else ParallelDim.TP
        )
        token_counts.append(
            collective(
                CollectiveOp.ALL_GATHER,
                numel_bytes(experts.num_experts, "int64") * ranks,
                ranks,
                "int64",
                Phase.FORWARD,
                dim,
                "MoE tokens per expert, to size the all-to-alls (per MoE layer)",
                count,
            )
        )
    forward, backward = [], []
    if inputs.megatron_core is not MegatronCore.V0_11:
        probs = numel_bytes(routed_rows(experts, inputs), dtype)
        if inputs.ep > 1:
            for phase, what, into in (
                (Phase.FORWARD, "routing probabilities", forward),
                (Phase.BACKWARD, "routing probabilities' gradient", backward),
            ):
                into.append(
                    collective(
                        CollectiveOp.ALL_TO_ALL, probs, inputs.ep, dtype, phase, ParallelDim.EP,
                        f"MoE {what} (per MoE layer)", count,
                    )
                )  # fmt: skip
        if inputs.tp > 1:
            forward.append(
                collective(
                    CollectiveOp.ALL_GATHER, probs * inputs.tp, inputs.tp, dtype, Phase.FORWARD, ParallelDim.TP,
                    "routing probabilities gathered for the experts (per MoE layer)", count,
                )
            )  # fmt: skip
            backward.append(
                collective(
                    CollectiveOp.REDUCE_SCATTER, probs * inputs.tp, inputs.tp, dtype, Phase.BACKWARD, ParallelDim.TP,
                    "routing probabilities' gradient (per MoE layer)", count,
                )
            )  # fmt: skip
    return RoutingMetadata(token_counts, forward, backward)


def expert_tensor_collectives(shape: TransformerShape, inputs: NormalisedInputs, count: int) -> list[PlannedCollective]:
    """With TP (expert-tensor-parallel size = tp), per MoE layer: the routed tokens all-gathered for the experts
    and their output reduce-scattered, forward; the mirrors backward. [AG, RS] forward then [AG, RS] backward,
    each run ``count`` times a step."""
    gathered = all_to_all_bytes(shape.experts, shape.hidden_size, inputs) * inputs.tp
    return [
        collective(op, gathered, inputs.tp, inputs.activation_dtype, phase, ParallelDim.TP, label, count)
        for op, phase, label in (
            (CollectiveOp.ALL_GATHER, Phase.FORWARD, "routed tokens gathered for the experts (per MoE layer)"),
            (CollectiveOp.REDUCE_SCATTER, Phase.FORWARD, "experts' output (per MoE layer)"),
            (CollectiveOp.ALL_GATHER, Phase.BACKWARD, "experts' output gradient (per MoE layer)"),
            (CollectiveOp.REDUCE_SCATTER, Phase.BACKWARD, "routed tokens' gradient (per MoE layer)"),
        )
    ]


def expert_parallel_collectives(
    shape: TransformerShape, inputs: NormalisedInputs, moe_layers: int
) -> list[PlannedCollective]:
    """All-to-alls over EP and, with TP, the expert-tensor-parallel gathers of one stage's ``moe_layers``, with
    the dispatcher's routing metadata."""
    once = moe_layers * inputs.micro_batches
    items = token_all_to_alls(shape, inputs, 2 * once) if inputs.ep > 1 else []
    items += [item for part in routing_metadata(shape, inputs, once) for item in part]
    if inputs.tp > 1:
        items += expert_tensor_collectives(shape, inputs, once)
    return items


_EXPERT_BIAS = ".mlp.gate.e_score_correction_bias"  # DeepSeek-V3's router buffer (transformers' naming)


def has_expert_bias(buffers: list) -> bool:
    return any(buffer.name.endswith(_EXPERT_BIAS) for buffer in buffers)


def expert_bias_reduction(
    buffers: list, stage_units: list[Unit], num_experts: int, inputs: NormalisedInputs
) -> list[PlannedCollective]:
    """DeepSeek-V3's auxiliary-loss-free balancing as Megatron trains it (``--moe-router-enable-expert-bias``):
    once per step, after the gradients are reduced, the stage's routers' token counts per expert (float32, one row
    per MoE layer: megatron/core/transformer/moe/router.py, ``local_tokens_per_expert``) are stacked and all-reduced
    over the TP×DP group to update each expert's bias (megatron/core/distributed/finalize_model_grads.py,
    ``_update_router_expert_bias``; megatron/core/transformer/moe/moe_utils.py, ``get_updated_expert_bias``:
    ``torch.distributed.all_reduce(tokens_per_expert, group=parallel_state.get_tensor_and_data_parallel_group(
    with_context_parallel=True))``). A model with such a bias has ``e_score_correction_bias`` buffers."""
    layers = {unit.name for unit in stage_units if not unit.is_root}
    biased = sum(1 for buffer in buffers if buffer.name.endswith(_EXPERT_BIAS) and
                 buffer.name.removesuffix(_EXPERT_BIAS) in layers)  # fmt: skip
    group = inputs.tp * inputs.dp
    if not biased or group == 1:
        return []
    return [
        collective(
            CollectiveOp.ALL_REDUCE,
            numel_bytes(biased * num_experts, "float32"),
            group,
            "float32",
            Phase.BACKWARD,
            ParallelDim.DP if inputs.tp == 1 else ParallelDim.TP if inputs.dp == 1 else ParallelDim.TP_DP,
            f"expert-bias token counts ({biased} MoE layers × {num_experts} experts; aux-loss-free balancing, once "
            "per step)",
        )
    ]


def expert_parallel_notes(shape: TransformerShape, inputs: NormalisedInputs) -> list[str]:
    """What a plan with experts assumes: the rank layout, the all-to-all convention and the load."""
    experts = shape.experts
    notes = []
    if inputs.tp > 1:
        notes.append(
            "Mixture of experts with tensor parallelism runs under sequence parallelism (Megatron requires it), "
            "so sequence_parallel is on; experts are split over TP too (expert-tensor-parallel size = tp)."
        )
    if inputs.ep == 1:
        return notes
    replica = inputs.tp * inputs.pp
    tokens = f"micro_batch {inputs.micro_batch} × seq_len {inputs.seq_len}" + (
        f" / tp {inputs.tp}" if inputs.tp > 1 else ""
    )
    size = all_to_all_bytes(experts, shape.hidden_size, inputs)
    notes.append(
        f"Expert parallel: EP groups of {inputs.ep} consecutive data-parallel replicas (ranks {replica} apart), "
        f"carved from the {inputs.dp} DP ranks as Megatron and DeepSpeed do; each EP rank holds "
        f"{experts.num_experts // inputs.ep} of the {experts.num_experts} experts of every MoE layer. Per MoE "
        "layer and micro-batch: a dispatch and a combine all-to-all forward, their two mirrors backward."
    )
    if inputs.capacity_factor is None:
        notes.append(
            f"All-to-all convention: dropless routing with an even load; each rank's buffer = {tokens} × top_k "
            f"{experts.experts_per_token} × hidden {shape.hidden_size} × {inputs.activation_dtype}"
            + (f" × hot_expert_factor {inputs.hot_expert_factor:g}" if inputs.hot_expert_factor != 1 else "")
            + f" = {size:,} bytes; bytes_total is that per-rank buffer, as nccl-tests' alltoall counts it."
        )
    else:
        notes.append(
            f"All-to-all convention: capacity factor {inputs.capacity_factor:g}, every expert's share padded to "
            f"ceil({inputs.capacity_factor:g} × {tokens} × top_k {experts.experts_per_token} / "
            f"{experts.num_experts} experts) tokens; each rank's buffer = {size:,} bytes (bytes_total, as "
            "nccl-tests' alltoall counts it)."
        )
    notes.append(
        f"Megatron-core {inputs.megatron_core.value}'s all-to-all dispatcher: "
        + (
            "pads every expert to capacity, so no token counts are exchanged"
            if inputs.capacity_factor is not None
            else f"all-gathers each rank's {experts.num_experts} int64 token counts per expert over its "
            f"{inputs.tp * inputs.ep} TP×EP ranks before each dispatch"
        )
        + (
            "; the routing probabilities stay on the token's rank (before 0.12)."
            if inputs.megatron_core is MegatronCore.V0_11
            else "; the routing probabilities (one per routed token) get their own all-to-all forward and backward "
            "(0.12 on)."
        )
    )
    notes.append(
        f"Load imbalance: the busiest EP rank receives hot_expert_factor {inputs.hot_expert_factor:g} × an even "
        "share; KCCB's all-to-all moves equal buffers, so every buffer is sized for the busiest rank"
        + (" (capacity padding fixes the size whatever the load)." if inputs.capacity_factor else ".")
        + " Real routers are skewed: raise --hot-expert-factor (up to ep) to emulate it."
    )
    edp = inputs.dp // inputs.ep
    rest = f"router, shared-expert, attention and embedding gradients over all {inputs.dp} DP ranks."
    if edp > 1:
        notes.append(
            f"Expert gradients all-reduce over the expert-data-parallel group of dp / ep = {edp} ranks "
            f"(ranks {replica * inputs.ep} apart); {rest}"
        )
    else:
        notes.append(f"Expert gradients are not all-reduced: dp / ep = 1, no other rank holds the same experts; {rest}")
    return notes
