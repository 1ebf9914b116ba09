"""HuggingFace ``config.json`` → ``ModelInventory`` for decoder-only transformer families, dense and
mixture-of-experts.

The parameter list is built from closed formulas in the order HuggingFace's modelling code registers
them (transformers ≥ 5, which stores each layer's routed experts as two 3-D tensors), so counts are
exact (Llama-2-7B 6,738,415,616; Llama-3-8B 8,030,261,248; GPT-2 124,439,808; Mistral-Nemo-Base-2407
12,247,782,400; Mixtral-8x7B 46,702,792,704) without importing ``transformers`` or running any code from
the model repository (``trust_remote_code`` does not exist here). Each family is one row of
``FAMILIES``: its field names, the fields it understands, its modules in registration and in
execution order, and for mixtures of experts which layers have experts and how its MoE block is laid
out. A field no row understands is refused by name rather than silently ignored; expert fields in a
family without experts (a Mixtral relabelled ``mistral``) are refused as such, never planned dense.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emuplan import json_input
from emuplan.workload.inventory import (
    BufferInfo,
    ExpertShape,
    LatentAttention,
    ModelInventory,
    ParameterInfo,
    SampleSpec,
    TransformerShape,
)

_TORCH_DTYPES = {"float32", "float16", "bfloat16"}

# Fields every HuggingFace config may carry that change no parameter: bookkeeping, tokens, generation
# and training-time switches (PretrainedConfig's own attributes, old and new).
_BOOKKEEPING_FIELDS = frozenset(
    [
        "_name_or_path",
        "architectures",
        "auto_map",
        "model_type",
        "transformers_version",
        "torch_dtype",
        "dtype",
        "use_cache",
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
        "sep_token_id",
        "decoder_start_token_id",
        "id2label",
        "label2id",
        "problem_type",
        "tokenizer_class",
        "task_specific_params",
        "finetuning_task",
        "prefix",
        "output_attentions",
        "output_hidden_states",
        "return_dict",
        "torchscript",
        "use_bfloat16",
        "tf_legacy_loss",
        "chunk_size_feed_forward",
        "is_decoder",
        "initializer_range",
        "max_length",
        "min_length",
        "do_sample",
        "early_stopping",
        "num_beams",
        "num_beam_groups",
        "diversity_penalty",
        "temperature",
        "top_k",
        "top_p",
        "typical_p",
        "repetition_penalty",
        "length_penalty",
        "no_repeat_ngram_size",
        "encoder_no_repeat_ngram_size",
        "bad_words_ids",
        "num_return_sequences",
        "output_scores",
        "return_dict_in_generate",
        "forced_bos_token_id",
        "forced_eos_token_id",
        "remove_invalid_values",
        "exponential_decay_length_penalty",
        "suppress_tokens",
        "begin_suppress_tokens",
        "cross_attention_hidden_size",
        "tie_encoder_decoder",
    ]
)
# Fields that would add or reshape parameters when set; planned only at their plain value.
_MUST_BE_UNSET = ("is_encoder_decoder", "add_cross_attention", "pruned_heads")
# Rotary, normalisation and attention-window settings of the Llama-style families: they shape no parameter.
_ROTARY_FIELDS = frozenset(
    [
        "hidden_act",
        "rms_norm_eps",
        "rope_theta",
        "rope_scaling",
        "rope_parameters",
        "attention_dropout",
        "pretraining_tp",
        "sliding_window",
        "use_sliding_window",
        "max_window_layers",
        "layer_types",
    ]
)


class ConfigError(ValueError):
    """A config.json that cannot be read; the message names the file and field."""


@dataclass(frozen=True)
class Module:
    """One module in a transformer: its name and its parameters (suffix, shape) in registration order.

    ``gradients_reversed``: autograd makes a Linear's (or Conv1D's) bias gradient ready before its
    weight (the bias is the first input of ``addmm``), a LayerNorm's weight before its bias.
    """

    name: str
    parameters: tuple[tuple[str, tuple[int, ...]], ...]
    gradients_reversed: bool = True


def _linear(name: str, in_features: int, out_features: int, bias: bool) -> Module:
    weight = ("weight", (out_features, in_features))
    return Module(name, (weight, ("bias", (out_features,))) if bias else (weight,))


def _norm(name: str, hidden: int, bias: bool = False) -> Module:
    return Module(name, (("weight", (hidden,)), *((("bias", (hidden,)),) if bias else ())), gradients_reversed=False)


def _conv1d(name: str, in_features: int, out_features: int) -> Module:
    """GPT-2's Conv1D: the weight is stored [in, out]."""
    return Module(name, (("weight", (in_features, out_features)), ("bias", (out_features,))))


@dataclass(frozen=True)
class Layout:
    """A model's modules in registration order, and the same names in the order forward runs them.

    A tied LM head shares the embedding's weight: its gradient is complete only after the embedding's
    backward, so the shared weight appears once, at the embedding.
    """

    registration: list[Module]
    execution: list[str]
    buffers: list[BufferInfo]


def _attention(p: str, shape: TransformerShape) -> tuple[list[Module], list[str]]:
    """Self-attention's modules in registration order and the order forward runs them."""
    h, head_dim = shape.hidden_size, shape.attention_head_dim
    mla = shape.latent_attention
    if mla is not None:
        heads = shape.num_attention_heads
        qk_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        if mla.q_lora_rank is None:
            query = [_linear(f"{p}.q_proj", h, heads * qk_head, bias=False)]
        else:
            query = [
                _linear(f"{p}.q_a_proj", h, mla.q_lora_rank, shape.qkv_bias),
                _norm(f"{p}.q_a_layernorm", mla.q_lora_rank),
                _linear(f"{p}.q_b_proj", mla.q_lora_rank, heads * qk_head, bias=False),
            ]
        modules = [
            *query,
            _linear(f"{p}.kv_a_proj_with_mqa", h, mla.kv_lora_rank + mla.qk_rope_head_dim, shape.qkv_bias),
            _norm(f"{p}.kv_a_layernorm", mla.kv_lora_rank),
            _linear(f"{p}.kv_b_proj", mla.kv_lora_rank, heads * (mla.qk_nope_head_dim + mla.v_head_dim), bias=False),
            _linear(f"{p}.o_proj", heads * mla.v_head_dim, h, shape.output_bias),
        ]
        return modules, [module.name for module in modules]
    q, kv = shape.num_attention_heads * head_dim, shape.num_key_value_heads * head_dim
    modules = [
        _linear(f"{p}.q_proj", h, q, shape.qkv_bias),
        _linear(f"{p}.k_proj", h, kv, shape.qkv_bias),
        _linear(f"{p}.v_proj", h, kv, shape.qkv_bias),
        _linear(f"{p}.o_proj", q, h, shape.output_bias),
    ]
    execution = [f"{p}.{m}" for m in ("q_proj", "k_proj", "v_proj", "o_proj")]
    if shape.qk_norm:
        modules += [_norm(f"{p}.q_norm", head_dim), _norm(f"{p}.k_norm", head_dim)]
        execution = [f"{p}.{m}" for m in ("q_proj", "q_norm", "k_proj", "k_norm", "v_proj", "o_proj")]
    return modules, execution


def _dense_mlp(p: str, hidden: int, inner: int, bias: bool) -> list[Module]:
    return [
        _linear(f"{p}.gate_proj", hidden, inner, bias),
        _linear(f"{p}.up_proj", hidden, inner, bias),
        _linear(f"{p}.down_proj", inner, hidden, bias),
    ]


def _experts(p: str, shape: TransformerShape) -> tuple[Module, Module]:
    """The router and the routed experts, stored as 3-D tensors [experts, out, in] (transformers ≥ 5)."""
    h, experts = shape.hidden_size, shape.experts
    n, inner = experts.num_experts, experts.intermediate_size
    router = Module(f"{p}.gate", (("weight", (n, h)),))
    routed = Module(
        f"{p}.experts", (("gate_up_proj", (n, 2 * inner, h)), ("down_proj", (n, h, inner))), gradients_reversed=True
    )
    return router, routed


def _mixtral_moe(p: str, shape: TransformerShape) -> tuple[list[Module], list[str]]:
    """Mixtral: router, then experts."""
    router, routed = _experts(p, shape)
    return [router, routed], [router.name, routed.name]


def _qwen3_moe(p: str, shape: TransformerShape) -> tuple[list[Module], list[str]]:
    """Qwen3-MoE: the experts are registered before the router that runs first."""
    router, routed = _experts(p, shape)
    return [routed, router], [router.name, routed.name]


def _qwen2_moe(p: str, shape: TransformerShape) -> tuple[list[Module], list[str]]:
    """Qwen2-MoE: router, experts, a shared expert MLP and its sigmoid gate; the shared expert runs first."""
    router, routed = _experts(p, shape)
    shared = _dense_mlp(f"{p}.shared_expert", shape.hidden_size, shape.experts.shared_intermediate_size, False)
    gate = _linear(f"{p}.shared_expert_gate", shape.hidden_size, 1, bias=False)
    return [router, routed, *shared, gate], [*(m.name for m in shared), router.name, routed.name, gate.name]


def _deepseek_moe(p: str, shape: TransformerShape) -> tuple[list[Module], list[str]]:
    """DeepSeek-V2/V3: experts, router, shared experts; the shared experts run last."""
    router, routed = _experts(p, shape)
    shared = _dense_mlp(
        f"{p}.shared_experts", shape.hidden_size, shape.experts.shared_intermediate_size, shape.mlp_bias
    )
    return [routed, router, *shared], [router.name, routed.name, *(m.name for m in shared)]


def _llama_layout(shape: TransformerShape) -> Layout:
    h = shape.hidden_size
    moe_block = FAMILIES[shape.family].moe_block
    moe_layers = set(shape.experts.layers) if shape.experts else set()
    registration = [Module("model.embed_tokens", (("weight", (shape.vocab_size, h)),))]
    execution = ["model.embed_tokens"]
    for i in range(shape.num_layers):
        p = f"model.layers.{i}"
        attention, attention_order = _attention(f"{p}.self_attn", shape)
        if i in moe_layers:
            mlp, mlp_order = moe_block(f"{p}.mlp", shape)
        else:
            mlp = _dense_mlp(f"{p}.mlp", h, shape.intermediate_size, shape.mlp_bias)
            mlp_order = [module.name for module in mlp]
        registration += [
            *attention,
            *mlp,
            _norm(f"{p}.input_layernorm", h),
            _norm(f"{p}.post_attention_layernorm", h),
        ]
        execution += [f"{p}.input_layernorm", *attention_order, f"{p}.post_attention_layernorm", *mlp_order]
    registration.append(_norm("model.norm", h))
    execution.append("model.norm")
    if not shape.tie_word_embeddings:
        registration.append(_linear("lm_head", h, shape.vocab_size, bias=False))
        execution.append("lm_head")
    # DeepSeek-V3's router keeps a per-expert score correction; the rotary embedding keeps its inverse
    # frequencies, and a copy for dynamic scaling, as buffers.
    buffers = []
    if FAMILIES[shape.family].router_bias_buffer:
        buffers += [
            BufferInfo(name=f"model.layers.{i}.mlp.gate.e_score_correction_bias", shape=[shape.experts.num_experts])
            for i in sorted(moe_layers)
        ]
    buffers += [
        BufferInfo(name=f"model.rotary_emb.{name}", shape=[shape.attention_head_dim // 2], dtype="float32")
        for name in ("inv_freq", "original_inv_freq")
    ]
    return Layout(registration, execution, buffers)


def _gpt2_layout(shape: TransformerShape) -> Layout:
    h, inner = shape.hidden_size, shape.intermediate_size
    registration = [
        Module("transformer.wte", (("weight", (shape.vocab_size, h)),)),
        Module("transformer.wpe", (("weight", (shape.max_position_embeddings, h)),)),
    ]
    execution = ["transformer.wte", "transformer.wpe"]
    for i in range(shape.num_layers):
        p = f"transformer.h.{i}"
        layer = [
            _norm(f"{p}.ln_1", h, bias=True),
            _conv1d(f"{p}.attn.c_attn", h, 3 * h),
            _conv1d(f"{p}.attn.c_proj", h, h),
            _norm(f"{p}.ln_2", h, bias=True),
            _conv1d(f"{p}.mlp.c_fc", h, inner),
            _conv1d(f"{p}.mlp.c_proj", inner, h),
        ]
        registration += layer
        execution += [module.name for module in layer]
    registration.append(_norm("transformer.ln_f", h, bias=True))
    execution.append("transformer.ln_f")
    if not shape.tie_word_embeddings:
        registration.append(_linear("lm_head", h, shape.vocab_size, bias=False))
        execution.append("lm_head")
    return Layout(registration, execution, buffers=[])


class ConfigReader:
    """Typed reads of one config's fields; every error names the file and the field."""

    def __init__(self, config: dict[str, Any], where: str) -> None:
        self.config, self.where = config, where

    def integer(self, field: str, default: int | None = None, minimum: int = 1) -> int:
        value = self.config.get(field)
        if value is None:
            if default is None:
                raise ConfigError(f"{self.where}: missing field {field!r}")
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            kind = "a positive integer" if minimum == 1 else f"an integer of at least {minimum}"
            raise ConfigError(f"{self.where}: field {field!r} must be {kind}, got {value!r}")
        return value

    def one_of(self, fields: tuple[str, ...]) -> int:
        """A number some configs store under another name (transformers' ``attribute_map``): the first
        given; the names must not disagree."""
        given = {field: self.integer(field) for field in fields if self.config.get(field) is not None}
        if len(set(given.values())) > 1:
            raise ConfigError(
                f"{self.where}: fields {' and '.join(map(repr, given))} disagree: {', '.join(map(str, given.values()))}"
            )
        if not given:
            raise ConfigError(f"{self.where}: missing field {fields[0]!r}")
        return next(iter(given.values()))

    def optional_integer(self, field: str) -> int | None:
        return None if self.config.get(field) is None else self.integer(field)

    def layer_list(self, field: str, layers: int) -> set[int]:
        value = self.config.get(field) or []
        if not isinstance(value, list) or any(
            isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < layers for i in value
        ):
            raise ConfigError(
                f"{self.where}: field {field!r} must be a list of layer indices 0…{layers - 1}, got {value!r}"
            )
        return set(value)


def _mixtral_experts(read: ConfigReader, layers: int) -> ExpertShape:
    """Every layer's MLP is ``num_local_experts`` experts of ``intermediate_size``."""
    return ExpertShape(
        num_experts=read.one_of(("num_local_experts", "num_experts")),
        experts_per_token=read.integer("num_experts_per_tok"),
        intermediate_size=read.integer("intermediate_size"),
        layers=list(range(layers)),
    )


def _qwen_experts(read: ConfigReader, layers: int, shared: bool) -> ExpertShape:
    """Qwen2/3-MoE: layer i has experts unless listed in ``mlp_only_layers`` or (i + 1) is not a multiple of
    ``decoder_sparse_step``; Qwen2-MoE adds a shared expert of ``shared_expert_intermediate_size``."""
    dense = read.layer_list("mlp_only_layers", layers)
    step = read.integer("decoder_sparse_step", default=1)
    return ExpertShape(
        num_experts=read.one_of(("num_experts", "num_local_experts")),
        experts_per_token=read.integer("num_experts_per_tok"),
        intermediate_size=read.integer("moe_intermediate_size"),
        shared_intermediate_size=read.integer("shared_expert_intermediate_size") if shared else 0,
        layers=[i for i in range(layers) if i not in dense and (i + 1) % step == 0],
    )


def _deepseek_experts(read: ConfigReader, layers: int) -> ExpertShape:
    """DeepSeek-V2/V3: the first ``first_k_dense_replace`` layers are dense, every later one has
    ``n_routed_experts`` experts and ``n_shared_experts`` shared ones fused into one MLP."""
    if read.config.get("moe_layer_freq", 1) != 1:
        raise ConfigError(
            f"{read.where}: field 'moe_layer_freq' = {read.config['moe_layer_freq']!r} is not supported "
            "(transformers puts experts in every layer after first_k_dense_replace)"
        )
    inner = read.integer("moe_intermediate_size")
    return ExpertShape(
        num_experts=read.one_of(("n_routed_experts", "num_experts", "num_local_experts")),
        experts_per_token=read.integer("num_experts_per_tok"),
        intermediate_size=inner,
        shared_intermediate_size=inner * read.integer("n_shared_experts"),
        layers=list(range(read.integer("first_k_dense_replace", default=0, minimum=0), layers)),
    )


def _latent_attention(read: ConfigReader) -> LatentAttention:
    return LatentAttention(
        q_lora_rank=read.optional_integer("q_lora_rank"),
        kv_lora_rank=read.integer("kv_lora_rank"),
        qk_nope_head_dim=read.integer("qk_nope_head_dim"),
        qk_rope_head_dim=read.integer("qk_rope_head_dim"),
        v_head_dim=read.integer("v_head_dim"),
    )


@dataclass(frozen=True)
class Family:
    """One row of the family table: how a model_type names its fields and lays out its parameters."""

    layout: Callable[[TransformerShape], Layout]
    aliases: dict[str, str]  # planner's name → the config's own field name
    understood: frozenset[str]  # family fields that shape no parameter
    tie_word_embeddings: bool  # the family's default
    head_dim: bool = False  # honours an explicit head_dim
    attention_bias: bool = False  # honours attention_bias (q, k, v and o biases)
    mlp_bias: bool = False  # honours mlp_bias
    qkv_bias: bool = False  # has q, k and v biases (Qwen2)
    qkv_bias_field: bool = False  # honours a ``qkv_bias`` field that can turn them off (Qwen2-MoE)
    qk_norm: bool = False  # Qwen3's per-head query and key norms
    # Mixture of experts: the fields read_experts takes, how it reads them, and the MoE block's modules.
    expert_fields: frozenset[str] = frozenset()
    read_experts: Callable[[ConfigReader, int], ExpertShape] | None = None
    moe_block: Callable[[str, TransformerShape], tuple[list[Module], list[str]]] | None = None
    router_bias_buffer: bool = False  # DeepSeek-V3's e_score_correction_bias
    latent_attention: bool = False  # DeepSeek's MLA (its fields are MLA_FIELDS)


_LLAMA_NAMES = {
    name: name
    for name in [
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "intermediate_size",
        "vocab_size",
        "max_position_embeddings",
    ]
}
_GPT2_NAMES = {
    "vocab_size": "vocab_size",
    "hidden_size": "n_embd",
    "num_hidden_layers": "n_layer",
    "num_attention_heads": "n_head",
    "intermediate_size": "n_inner",
    "max_position_embeddings": "n_positions",
}
_GPT2_UNDERSTOOD = frozenset(
    [
        "activation_function",
        "resid_pdrop",
        "embd_pdrop",
        "attn_pdrop",
        "layer_norm_epsilon",
        "n_ctx",
        "scale_attn_weights",
        "scale_attn_by_inverse_layer_idx",
        "reorder_and_upcast_attn",
        "summary_type",
        "summary_use_proj",
        "summary_activation",
        "summary_proj_to_labels",
        "summary_first_dropout",
    ]
)
# Routing settings (load-balancing loss, score normalisation, router noise, expert groups): no parameter.
_ROUTING_FIELDS = frozenset(
    [
        "router_aux_loss_coef",
        "output_router_logits",
        "router_jitter_noise",
        "norm_topk_prob",
        "routed_scaling_factor",
        "n_group",
        "topk_group",
        "topk_method",
        "scoring_func",
        "aux_loss_alpha",
        "seq_aux",
        "ep_size",
    ]
)
_QWEN_EXPERT_FIELDS = frozenset(
    ["num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size", "decoder_sparse_step",
     "mlp_only_layers"]
)  # fmt: skip
_DEEPSEEK_EXPERT_FIELDS = frozenset(
    ["n_routed_experts", "num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size",
     "n_shared_experts", "first_k_dense_replace", "moe_layer_freq"]
)  # fmt: skip
MLA_FIELDS = frozenset(["q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"])
# DeepSeek: head_dim and qk_head_dim are derived from the MLA fields (transformers overwrites them); the
# multi-token-prediction layers are not built by transformers, so not counted here either.
_DEEPSEEK_UNDERSTOOD = _ROTARY_FIELDS | _ROUTING_FIELDS | {"head_dim", "qk_head_dim", "rope_interleave",
                                                           "num_nextn_predict_layers", "num_mtp_layers"}  # fmt: skip

# model_type → its row.
FAMILIES: dict[str, Family] = {
    "llama": Family(
        _llama_layout, _LLAMA_NAMES, _ROTARY_FIELDS, False, head_dim=True, attention_bias=True, mlp_bias=True
    ),
    "mistral": Family(_llama_layout, _LLAMA_NAMES, _ROTARY_FIELDS, False, head_dim=True),
    "qwen2": Family(_llama_layout, _LLAMA_NAMES, _ROTARY_FIELDS, False, head_dim=True, qkv_bias=True),
    "gpt2": Family(_gpt2_layout, _GPT2_NAMES, _GPT2_UNDERSTOOD, True),
    "mixtral": Family(
        _llama_layout,
        _LLAMA_NAMES,
        _ROTARY_FIELDS | _ROUTING_FIELDS,
        False,
        head_dim=True,
        expert_fields=frozenset(["num_local_experts", "num_experts", "num_experts_per_tok"]),
        read_experts=_mixtral_experts,
        moe_block=_mixtral_moe,
    ),
    "qwen2_moe": Family(
        _llama_layout,
        _LLAMA_NAMES,
        _ROTARY_FIELDS | _ROUTING_FIELDS,
        False,
        head_dim=True,
        qkv_bias=True,
        qkv_bias_field=True,
        expert_fields=_QWEN_EXPERT_FIELDS | {"shared_expert_intermediate_size"},
        read_experts=lambda read, layers: _qwen_experts(read, layers, shared=True),
        moe_block=_qwen2_moe,
    ),
    "qwen3_moe": Family(
        _llama_layout,
        _LLAMA_NAMES,
        _ROTARY_FIELDS | _ROUTING_FIELDS,
        False,
        head_dim=True,
        attention_bias=True,
        qk_norm=True,
        expert_fields=_QWEN_EXPERT_FIELDS,
        read_experts=lambda read, layers: _qwen_experts(read, layers, shared=False),
        moe_block=_qwen3_moe,
    ),
    "deepseek_v2": Family(
        _llama_layout,
        _LLAMA_NAMES,
        _DEEPSEEK_UNDERSTOOD,
        False,
        attention_bias=True,
        mlp_bias=True,
        expert_fields=_DEEPSEEK_EXPERT_FIELDS,
        read_experts=_deepseek_experts,
        moe_block=_deepseek_moe,
        latent_attention=True,
    ),
    "deepseek_v3": Family(
        _llama_layout,
        _LLAMA_NAMES,
        _DEEPSEEK_UNDERSTOOD,
        False,
        attention_bias=True,
        expert_fields=_DEEPSEEK_EXPERT_FIELDS,
        read_experts=_deepseek_experts,
        moe_block=_deepseek_moe,
        router_bias_buffer=True,
        latent_attention=True,
    ),
}
SUPPORTED_MODEL_TYPES = tuple(FAMILIES)
MOE_MODEL_TYPES = tuple(name for name, family in FAMILIES.items() if family.read_experts)
_ALL_EXPERT_FIELDS = frozenset().union(*(family.expert_fields for family in FAMILIES.values()))


def _positive_int(value: Any, field: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: field {field!r} must be a positive integer, got {value!r}")
    return value


def _boolean(config: dict[str, Any], field: str, default: bool, where: str) -> bool:
    value = config.get(field)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: field {field!r} must be true or false, got {value!r}")
    return value


def _refuse_unknown_fields(config: dict[str, Any], family: Family, model_type: str, where: str) -> None:
    honoured = {"tie_word_embeddings"} | family.expert_fields
    honoured |= {"head_dim"} if family.head_dim else set()
    honoured |= {"attention_bias"} if family.attention_bias else set()
    honoured |= {"mlp_bias"} if family.mlp_bias else set()
    honoured |= {"qkv_bias"} if family.qkv_bias_field else set()
    honoured |= MLA_FIELDS if family.latent_attention else set()
    known = set(family.aliases.values()) | set(family.aliases) | honoured | family.understood | _BOOKKEEPING_FIELDS
    unknown = sorted(set(config) - known - set(_MUST_BE_UNSET))
    if not unknown:
        return
    # Expert fields in a family without experts: a mixture of experts relabelled as a dense model.
    experts = [] if family.read_experts else sorted(set(unknown) & _ALL_EXPERT_FIELDS)
    raise ConfigError(
        f"{where}: field {unknown[0]!r} is not understood by the planner for model_type {model_type!r}"
        + (f" (nor {', '.join(map(repr, unknown[1:]))})" if unknown[1:] else "")
        + "; its parameters cannot be counted exactly"
        + (
            f". {', '.join(map(repr, experts))} {'describes' if len(experts) == 1 else 'describe'} a mixture of "
            f"experts, which {model_type!r} models do not have: planning it as dense would drop its experts "
            "(families with experts: "
            f"{', '.join(MOE_MODEL_TYPES)})"
            if experts
            else ""
        )
    )


def transformer_shape_from_config(config: dict[str, Any], where: str = "config.json") -> TransformerShape:
    if not isinstance(config, dict):
        raise ConfigError(f"{where}: expected a JSON object, got {type(config).__name__}")
    model_type = config.get("model_type")
    if model_type is None:
        raise ConfigError(f"{where}: missing field 'model_type'")
    family = FAMILIES.get(model_type)
    if family is None:
        raise ConfigError(
            f"{where}: unsupported model_type {model_type!r}; supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
        )
    _refuse_unknown_fields(config, family, model_type, where)
    for field in _MUST_BE_UNSET:
        if config.get(field):
            raise ConfigError(f"{where}: field {field!r} = {config[field]!r} is not supported (it adds parameters)")

    def number(name: str, default: int | None = None) -> int:
        field = family.aliases[name]
        value = config.get(field, config.get(name))
        if value is None:
            if default is None:
                raise ConfigError(f"{where}: missing field {field!r}")
            return default
        return _positive_int(value, field, where)

    read = ConfigReader(config, where)
    hidden = number("hidden_size")
    heads = number("num_attention_heads")
    layers = number("num_hidden_layers")
    # Multi-head attention only (GPT-2) has no field for key/value heads.
    kv_heads = number("num_key_value_heads", default=heads) if "num_key_value_heads" in family.aliases else heads
    latent = _latent_attention(read) if family.latent_attention else None
    explicit_head_dim = config.get("head_dim") if family.head_dim else None
    if latent is not None:
        head_dim = latent.qk_rope_head_dim  # what the rotary embedding turns
    elif explicit_head_dim is None:
        if hidden % heads:
            raise ConfigError(
                f"{where}: {family.aliases['hidden_size']} {hidden} is not divisible by "
                f"{family.aliases['num_attention_heads']} {heads}"
            )
        head_dim = hidden // heads
    else:
        head_dim = _positive_int(explicit_head_dim, "head_dim", where)
    if heads % kv_heads:
        raise ConfigError(f"{where}: num_attention_heads {heads} is not divisible by num_key_value_heads {kv_heads}")
    attention_bias = family.attention_bias and _boolean(config, "attention_bias", False, where)
    experts = family.read_experts(read, layers) if family.read_experts else None
    if experts is not None and experts.experts_per_token > experts.num_experts:
        raise ConfigError(
            f"{where}: field 'num_experts_per_tok' {experts.experts_per_token} is more than the model's "
            f"{experts.num_experts} experts"
        )
    qkv_bias = _boolean(config, "qkv_bias", family.qkv_bias, where) if family.qkv_bias_field else family.qkv_bias
    return TransformerShape(
        family=model_type,
        hidden_size=hidden,
        num_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        # GPT-2's n_inner: null means 4 × hidden.
        intermediate_size=number("intermediate_size", default=4 * hidden if model_type == "gpt2" else None),
        vocab_size=number("vocab_size"),
        max_position_embeddings=number("max_position_embeddings"),
        tie_word_embeddings=_boolean(config, "tie_word_embeddings", family.tie_word_embeddings, where),
        qkv_bias=qkv_bias or attention_bias,
        output_bias=attention_bias,
        mlp_bias=family.mlp_bias and _boolean(config, "mlp_bias", False, where),
        qk_norm=family.qk_norm,
        experts=experts,
        latent_attention=latent,
    )


def transformer_layout(shape: TransformerShape) -> Layout:
    return FAMILIES[shape.family].layout(shape)


def _parameters(layout: Layout, dtype: str) -> list[ParameterInfo]:
    return [
        ParameterInfo(name=f"{module.name}.{suffix}", shape=list(dims), dtype=dtype)
        for module in layout.registration
        for suffix, dims in module.parameters
    ]


def gradient_ready_order(layout: Layout) -> list[str]:
    """Parameter names in the order backward completes their gradients: modules in reverse execution
    order, each module's own parameters in the order autograd hands them over."""
    modules = {module.name: module for module in layout.registration}
    order = []
    for name in reversed(layout.execution):
        module = modules[name]
        suffixes = [suffix for suffix, _ in module.parameters]
        order += [f"{name}.{suffix}" for suffix in (reversed(suffixes) if module.gradients_reversed else suffixes)]
    return order


def transformer_parameters(shape: TransformerShape, dtype: str = "bfloat16") -> list[ParameterInfo]:
    """Every trainable tensor in registration order (tied embeddings counted once, as PyTorch does)."""
    return _parameters(transformer_layout(shape), dtype)


def inventory_from_hf_config(
    config: dict[str, Any], name: str | None = None, where: str = "config.json"
) -> ModelInventory:
    """``where`` is the file (or preset) the config came from; without ``name`` the model is named by
    ``config_model_name``."""
    shape = transformer_shape_from_config(config, where)
    name = name or config_model_name(config, where)
    declared = config.get("torch_dtype") or config.get("dtype")
    dtype = declared if declared in _TORCH_DTYPES else "bfloat16"
    layout = transformer_layout(shape)
    return ModelInventory(
        name=name,
        source_kind="hf_config",
        parameters=_parameters(layout, dtype),
        gradient_order=gradient_ready_order(layout),
        buffers=layout.buffers,
        sample=SampleSpec(
            shape=[shape.max_position_embeddings], dtype="int64", label_shape=[shape.max_position_embeddings]
        ),
        transformer=shape,
    )


def config_model_name(config: dict[str, Any], file_name: str) -> str:
    """The model a config.json describes: its ``_name_or_path`` (a hub id such as
    ``meta-llama/Llama-2-7b-hf``, or a local folder's last part), else its first ``architectures``
    entry, else the file as found (``folder/config.json``)."""
    name_or_path = config.get("_name_or_path")
    if isinstance(name_or_path, str) and name_or_path.strip():
        name_or_path = name_or_path.strip().rstrip("/\\")
        is_local = name_or_path.startswith(("/", ".", "~")) or "\\" in name_or_path or name_or_path.count("/") > 1
        return Path(name_or_path).name if is_local else name_or_path
    architectures = config.get("architectures")
    if isinstance(architectures, list) and architectures and isinstance(architectures[0], str) and architectures[0]:
        return architectures[0]
    path = Path(file_name)
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def read_hf_config(path: Path) -> ModelInventory:
    """Read a config.json file, named after the model it describes (``config_model_name``)."""
    try:
        config = json_input.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"{path}: not valid JSON ({error})") from None
    # Named from the whole path: a config.json given as ./config.json still has its folder's name.
    name = config_model_name(config, str(path.absolute())) if isinstance(config, dict) else None
    return inventory_from_hf_config(config, name, where=str(path))
