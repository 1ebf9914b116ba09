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
all-reduces (SP: reduce-scatters, whose backward all-gathers) its output; the column-parallel LM
head all-reduces its input gradient (SP: its input is all-gathered in forward, again in backward
for the weight gradient, and the gradient reduce-scattered); vocab-parallel cross-entropy adds 3
fp32 all-reduces of b·s (max logit, target logit, sum of exponentials). With sequence parallel each
rank's layer-norm (and row-parallel bias) gradients cover only its part of the sequence, so
``finalize_model_grads`` all-reduces them, coalesced, across TP once per step
(megatron/core/distributed/finalize_model_grads.py, ``_allreduce_non_tensor_model_parallel_grads``, which
older releases called ``_allreduce_layernorm_grads``); it reduces each
parameter's ``main_grad``, which bf16 training keeps in fp32 (Megatron turns on
``accumulate_allreduce_grads_in_fp32`` unless ``--grad-reduce-in-bf16``). A model with learned absolute
position embeddings (GPT-2) all-reduces its embedding output even under sequence parallel and splits it
locally (``LanguageModelEmbedding``).

Megatron pads the vocabulary to a multiple of 128 × tp (``--make-vocab-size-divisible-by``,
megatron/training/tokenizer/tokenizer.py ``_vocab_size_with_padding``) and splits attention heads
and key/value groups evenly over TP ranks (megatron/core/transformer/attention.py: ``divide``
asserts divisibility), so degrees that do not divide them are refused.
"""

from collections.abc import Callable

from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import NormalisedInputs, ParallelDim, Phase, PlannedCollective, PlanningError
from emuplan.workload.inventory import LatentAttention, ParameterInfo, TransformerShape
from emuplan.workload.strategies.common import collective, numel_bytes

AR, AG, RS = CollectiveOp.ALL_REDUCE, CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER
TP = ParallelDim.TP
MAKE_VOCAB_SIZE_DIVISIBLE_BY = 128  # Megatron-LM's default --make-vocab-size-divisible-by


def padded_vocab_size(vocab: int, tp: int) -> int:
    """The vocabulary Megatron builds its embedding and LM head with: a multiple of 128 × tp."""
    multiple = MAKE_VOCAB_SIZE_DIVISIBLE_BY * tp
    return -(-vocab // multiple) * multiple


def megatron_main_grad_dtype(inputs: NormalisedInputs) -> str:
    """The dtype of Megatron's ``main_grad``: fp32 (``accumulate_allreduce_grads_in_fp32``, which Megatron turns
    on for bf16 training) unless --grad-reduce-in-bf16 keeps the parameters' dtype."""
    return inputs.param_dtype if inputs.grad_reduce_in_bf16 else "float32"


def check_megatron_degrees(shape: TransformerShape, tp: int) -> None:
    """Megatron gives every TP rank whole attention heads and whole key/value groups."""
    heads = {"num_attention_heads": shape.num_attention_heads, "num_key_value_heads": shape.num_key_value_heads}
    for field, count in heads.items():
        if count % tp:
            raise PlanningError(
                f"tp: Megatron splits attention heads over tensor-parallel ranks, but the model's {field} "
                f"{count} is not divisible by tp {tp}"
            )


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
    layer_norm_numel: int = 0,
    main_grad_dtype: str = "float32",
    learned_positions: bool = False,
    expert_layers: int = 0,
    latent_attention: LatentAttention | None = None,
) -> list[PlannedCollective]:
    """Collectives of one pipeline stage holding ``layers`` layers; ``tokens`` = micro-batch × seq;
    ``vocab`` is the padded vocabulary; ``layer_norm_numel`` the stage's sequence-parallel gradients
    (layer norms, row-parallel biases, routers), all-reduced once per step under sequence parallel from
    ``main_grad``, in ``main_grad_dtype`` (fp32 unless Megatron's --grad-reduce-in-bf16).
    ``learned_positions``: the embedding adds learned absolute position embeddings (GPT-2).
    ``expert_layers``: layers whose MLP is routed experts only; their MLP's TP traffic is the token
    dispatcher's (``expert_parallel``), so only their attention counts here. ``latent_attention``: under
    sequence parallel, MLA's column-parallel up-projections gather the compressed query and key/value
    latents and the rotary key instead of the hidden state (megatron/core/transformer/multi_latent_attention.py)."""
    activation = numel_bytes(tokens * hidden, dtype)
    per_layer = (2 * layers - expert_layers) * micro_batches
    # The count's rule, in every per-layer label.
    pair = "per layer ×2" + (f"; ×1 in the {expert_layers} MoE layers" if expert_layers else "")

    def item(op, phase, label, count, size=activation, item_dtype=dtype):
        return collective(op, size, tp, item_dtype, phase, TP, label, count)

    forward, backward = [], []
    if has_embedding:
        if sequence_parallel and learned_positions:
            # LanguageModelEmbedding (megatron/core/models/common/embeddings/language_model_embedding.py) sets
            # reduce_scatter_embeddings only without learned absolute positions: with them the word embedding
            # all-reduces its output, the positions are added whole, and scatter_to_sequence_parallel_region
            # splits the sum locally (its backward all-gathers).
            forward.append(
                item(
                    AR, Phase.FORWARD, "vocab-parallel embedding output (learned positions added whole)", micro_batches
                )
            )
            backward.append(
                item(AG, Phase.BACKWARD, "embedding output gradient (backward of its local split)", micro_batches)
            )
        else:
            forward.append(
                item(RS if sequence_parallel else AR, Phase.FORWARD, "vocab-parallel embedding output", micro_batches)
            )
            if sequence_parallel:
                backward.append(
                    item(
                        AG, Phase.BACKWARD, "embedding output gradient (backward of its reduce-scatter)", micro_batches
                    )
                )
    if layers:
        if sequence_parallel and latent_attention is not None:
            counts = (layers * micro_batches, (layers - expert_layers) * micro_batches, per_layer)
            mla_forward, mla_backward = _latent_attention_gathers(
                latent_attention, hidden, tokens, dtype, counts, pair, item
            )
            forward += mla_forward
            backward += mla_backward
        elif sequence_parallel:
            forward += [
                item(AG, Phase.FORWARD, f"sequence-parallel input of QKV / MLP up ({pair})", per_layer),
                item(RS, Phase.FORWARD, f"attention / MLP output ({pair})", per_layer),
            ]
            backward += [
                item(AG, Phase.BACKWARD, f"row-parallel output gradient ({pair})", per_layer),
                item(
                    AG,
                    Phase.BACKWARD,
                    f"column-parallel input re-gathered for weight gradient ({pair})",
                    per_layer,
                ),
                item(RS, Phase.BACKWARD, f"column-parallel input gradient ({pair})", per_layer),
            ]
        else:
            forward.append(item(AR, Phase.FORWARD, f"attention / MLP row-parallel output ({pair})", per_layer))
            backward.append(item(AR, Phase.BACKWARD, f"QKV / MLP-up input gradient ({pair})", per_layer))
    if has_head:
        if sequence_parallel:
            forward.append(item(AG, Phase.FORWARD, "LM head input (sequence-parallel)", micro_batches))
            backward[:0] = [
                item(AG, Phase.BACKWARD, "LM head input re-gathered for weight gradient", micro_batches),
                item(RS, Phase.BACKWARD, "LM head input gradient", micro_batches),
            ]
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
    if sequence_parallel and layer_norm_numel:
        backward.append(
            item(
                AR,
                Phase.BACKWARD,
                "sequence-parallel layer-norm gradients (once per step)",
                1,
                size=numel_bytes(layer_norm_numel, main_grad_dtype),
                item_dtype=main_grad_dtype,
            )
        )
    return forward + backward


def _latent_attention_gathers(
    mla: LatentAttention,
    hidden: int,
    tokens: int,
    dtype: str,
    counts: tuple[int, int, int],
    pair: str,
    item: Callable[..., PlannedCollective],
) -> tuple[list[PlannedCollective], list[PlannedCollective]]:
    """Sequence-parallel traffic of MLA layers: the attention's gathers are its latents' (the query's
    q_lora_rank, or the hidden state without a query down-projection; kv_lora_rank; the rotary key's
    qk_rope_head_dim), the dense MLP's the hidden state; the row-parallel outputs are as in any layer.
    ``counts``: (attention, dense MLP, row-parallel outputs) per step."""
    attention, mlp, outputs = counts
    query, latent, rotary = mla.q_lora_rank or hidden, mla.kv_lora_rank, mla.qk_rope_head_dim

    def width(columns: int) -> int:
        return numel_bytes(tokens * columns, dtype)

    gathered = [
        (f"MLA query input ({query} wide; per layer)", query),
        (f"MLA key/value latent ({latent} wide; per layer)", latent),
    ]
    rotary_label = f"MLA rotary key ({rotary} wide; per layer)"
    mlp_label = "MLP / shared-expert up input (per layer with one)"
    forward = [
        *(item(AG, Phase.FORWARD, f"sequence-parallel {label}", attention, size=width(w)) for label, w in gathered),
        item(AG, Phase.FORWARD, f"sequence-parallel {rotary_label}", attention, size=width(rotary)),
        *([item(AG, Phase.FORWARD, f"sequence-parallel {mlp_label}", mlp)] if mlp else []),
        item(RS, Phase.FORWARD, f"attention / MLP output ({pair})", outputs),
    ]
    backward = [
        item(AG, Phase.BACKWARD, f"row-parallel output gradient ({pair})", outputs),
        *(
            item(AG, Phase.BACKWARD, f"{label} re-gathered for weight gradient", attention, size=width(w))
            for label, w in gathered
        ),
        *([item(AG, Phase.BACKWARD, f"{mlp_label} re-gathered for weight gradient", mlp)] if mlp else []),
        *(item(RS, Phase.BACKWARD, f"{label} gradient", attention, size=width(w)) for label, w in gathered),
        item(RS, Phase.BACKWARD, f"{rotary_label} gradient", attention, size=width(rotary)),
        *([item(RS, Phase.BACKWARD, f"{mlp_label} gradient", mlp)] if mlp else []),
    ]
    return forward, backward


# MLA's up-projections are column-parallel, its down-projections (q_a_proj, kv_a_proj_with_mqa) replicated.
_COLUMN_PARALLEL = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "embed_tokens", "lm_head", "wte",
                    "q_b_proj", "kv_b_proj")  # fmt: skip
_ROW_PARALLEL = ("o_proj", "down_proj")
_CONV1D_COLUMN = ("c_attn", "c_fc")  # GPT-2 Conv1D weights are [in, out]


_VOCABULARY = ("embed_tokens", "lm_head", "wte")
_MLA_DUPLICATED = ("q_a_proj", "kv_a_proj_with_mqa")  # MLA's down-projections: whole on every TP rank
_ROW_PARALLEL_BIAS = ("o_proj", "down_proj", "c_proj")


def _module_and_kind(param: ParameterInfo) -> tuple[str, str]:
    parts = param.name.split(".")
    return (parts[-2] if len(parts) > 1 else ""), parts[-1]


def sequence_parallel_parameters(parameters: list[ParameterInfo]) -> list[ParameterInfo]:
    """What Megatron marks ``sequence_parallel``: layer norms, row-parallel biases, MoE routers and MLA's
    duplicated down-projections (replicated over TP, their gradients computed from one part of the
    sequence; the router's in megatron/core/transformer/moe/router.py, the duplicated linears' in
    megatron/core/extensions/transformer_engine.py ``TELinear``)."""
    marked = []
    for param in parameters:
        module, kind = _module_and_kind(param)
        is_router = module == "gate" and kind == "weight"
        is_row_bias = module in _ROW_PARALLEL_BIAS and kind == "bias"
        if "norm" in module or module.startswith("ln_") or is_row_bias or is_router or module in _MLA_DUPLICATED:
            marked.append(param)
    return marked


def megatron_shard(param: ParameterInfo, tp: int) -> ParameterInfo:
    """The local piece a TP rank holds: column-parallel splits outputs, row-parallel inputs; the
    vocabulary (embedding, LM head) is padded first."""
    module, kind = _module_and_kind(param)
    shape = list(param.shape)
    if module in _VOCABULARY:
        shape[0] = padded_vocab_size(shape[0], tp) // tp
        return param.model_copy(update={"shape": shape})
    if module == "experts":  # [experts, 2 × inner, hidden] column-, [experts, hidden, inner] row-parallel
        dim = 1 if kind == "gate_up_proj" else 2
    elif module in _COLUMN_PARALLEL:
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
