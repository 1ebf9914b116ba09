"""HuggingFace ``config.json`` → ``ModelInventory`` for decoder-only transformer families.

The parameter list is built from closed formulas in the order HuggingFace's modelling code registers
them, so counts are exact (Llama-2-7B 6,738,415,616; Llama-3-8B 8,030,261,248; GPT-2 124,439,808;
Mistral-Nemo-Base-2407 12,247,782,400) without importing ``transformers`` or running any code from
the model repository (``trust_remote_code`` does not exist here). Each family is one row of
``FAMILIES``: its field names, the fields it understands, its modules in registration and in
execution order. A field no row understands is refused by name rather than silently ignored.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emuplan import json_input
from emuplan.workload.inventory import BufferInfo, ModelInventory, ParameterInfo, SampleSpec, TransformerShape

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


def _llama_layout(shape: TransformerShape) -> Layout:
    h, head_dim, inner = shape.hidden_size, shape.attention_head_dim, shape.intermediate_size
    q, kv = shape.num_attention_heads * head_dim, shape.num_key_value_heads * head_dim
    registration = [Module("model.embed_tokens", (("weight", (shape.vocab_size, h)),))]
    execution = ["model.embed_tokens"]
    for i in range(shape.num_layers):
        p = f"model.layers.{i}"
        registration += [
            _linear(f"{p}.self_attn.q_proj", h, q, shape.qkv_bias),
            _linear(f"{p}.self_attn.k_proj", h, kv, shape.qkv_bias),
            _linear(f"{p}.self_attn.v_proj", h, kv, shape.qkv_bias),
            _linear(f"{p}.self_attn.o_proj", q, h, shape.output_bias),
            _linear(f"{p}.mlp.gate_proj", h, inner, shape.mlp_bias),
            _linear(f"{p}.mlp.up_proj", h, inner, shape.mlp_bias),
            _linear(f"{p}.mlp.down_proj", inner, h, shape.mlp_bias),
            _norm(f"{p}.input_layernorm", h),
            _norm(f"{p}.post_attention_layernorm", h),
        ]
        execution += [
            f"{p}.{m}"
            for m in [
                "input_layernorm",
                "self_attn.q_proj",
                "self_attn.k_proj",
                "self_attn.v_proj",
                "self_attn.o_proj",
                "post_attention_layernorm",
                "mlp.gate_proj",
                "mlp.up_proj",
                "mlp.down_proj",
            ]
        ]
    registration.append(_norm("model.norm", h))
    execution.append("model.norm")
    if not shape.tie_word_embeddings:
        registration.append(_linear("lm_head", h, shape.vocab_size, bias=False))
        execution.append("lm_head")
    # The rotary embedding keeps its inverse frequencies, and a copy for dynamic scaling, as buffers.
    buffers = [
        BufferInfo(name=f"model.rotary_emb.{name}", shape=[head_dim // 2], dtype="float32")
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
    qkv_bias: bool = False  # always has q, k and v biases (Qwen2)


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

# model_type → its row. Families added later (e.g. mixture-of-experts) add a row and a layout.
FAMILIES: dict[str, Family] = {
    "llama": Family(
        _llama_layout, _LLAMA_NAMES, _ROTARY_FIELDS, False, head_dim=True, attention_bias=True, mlp_bias=True
    ),
    "mistral": Family(_llama_layout, _LLAMA_NAMES, _ROTARY_FIELDS, False, head_dim=True),
    "qwen2": Family(_llama_layout, _LLAMA_NAMES, _ROTARY_FIELDS, False, head_dim=True, qkv_bias=True),
    "gpt2": Family(_gpt2_layout, _GPT2_NAMES, _GPT2_UNDERSTOOD, True),
}
SUPPORTED_MODEL_TYPES = tuple(FAMILIES)


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
    honoured = {"tie_word_embeddings"}
    honoured |= {"head_dim"} if family.head_dim else set()
    honoured |= {"attention_bias"} if family.attention_bias else set()
    honoured |= {"mlp_bias"} if family.mlp_bias else set()
    known = set(family.aliases.values()) | set(family.aliases) | honoured | family.understood | _BOOKKEEPING_FIELDS
    unknown = sorted(set(config) - known - set(_MUST_BE_UNSET))
    if unknown:
        raise ConfigError(
            f"{where}: field {unknown[0]!r} is not understood by the planner for model_type {model_type!r}"
            + (f" (nor {', '.join(map(repr, unknown[1:]))})" if unknown[1:] else "")
            + "; its parameters cannot be counted exactly"
        )
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

    hidden = number("hidden_size")
    heads = number("num_attention_heads")
    # Multi-head attention only (GPT-2) has no field for key/value heads.
    kv_heads = number("num_key_value_heads", default=heads) if "num_key_value_heads" in family.aliases else heads
    explicit_head_dim = config.get("head_dim") if family.head_dim else None
    if explicit_head_dim is None:
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
    return TransformerShape(
        family=model_type,
        hidden_size=hidden,
        num_layers=number("num_hidden_layers"),
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        # GPT-2's n_inner: null means 4 × hidden.
        intermediate_size=number("intermediate_size", default=4 * hidden if model_type == "gpt2" else None),
        vocab_size=number("vocab_size"),
        max_position_embeddings=number("max_position_embeddings"),
        tie_word_embeddings=_boolean(config, "tie_word_embeddings", family.tie_word_embeddings, where),
        qkv_bias=family.qkv_bias or attention_bias,
        output_bias=attention_bias,
        mlp_bias=family.mlp_bias and _boolean(config, "mlp_bias", False, where),
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
