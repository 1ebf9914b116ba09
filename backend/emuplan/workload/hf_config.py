"""HuggingFace ``config.json`` → ``ModelInventory`` for decoder-only transformer families.

The parameter list is built from closed formulas in the order HuggingFace's modelling code registers
them, so counts are exact (Llama-2-7B 6,738,415,616; Llama-3-8B 8,030,261,248; GPT-2 124,439,808)
without importing ``transformers`` or running any code from the model repository
(``trust_remote_code`` does not exist here).
"""

import json
from pathlib import Path
from typing import Any

from emuplan.workload.inventory import ModelInventory, ParameterInfo, SampleSpec, TransformerShape

# model_type → family whose parameter layout it shares.
SUPPORTED_MODEL_TYPES = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "gpt2": "gpt2"}

_TORCH_DTYPES = {"float32", "float16", "bfloat16"}


class ConfigError(ValueError):
    """A config.json that cannot be read; the message names the file and field."""


def _field(config: dict[str, Any], *names: str, where: str) -> Any:
    for name in names:
        if name in config and config[name] is not None:
            return config[name]
    raise ConfigError(f"{where}: missing field {names[0]!r}")


def _positive_int(config: dict[str, Any], *names: str, where: str) -> int:
    value = _field(config, *names, where=where)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: field {names[0]!r} must be a positive integer, got {value!r}")
    return value


def transformer_shape_from_config(config: dict[str, Any], where: str = "config.json") -> TransformerShape:
    if not isinstance(config, dict):
        raise ConfigError(f"{where}: expected a JSON object, got {type(config).__name__}")
    model_type = config.get("model_type")
    if model_type is None:
        raise ConfigError(f"{where}: missing field 'model_type'")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ConfigError(
            f"{where}: unsupported model_type {model_type!r}; supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
        )
    family = SUPPORTED_MODEL_TYPES[model_type]
    if family == "gpt2":
        hidden = _positive_int(config, "n_embd", "hidden_size", where=where)
        heads = _positive_int(config, "n_head", "num_attention_heads", where=where)
        inner = config.get("n_inner") or 4 * hidden
        return TransformerShape(
            family=family,
            hidden_size=hidden,
            num_layers=_positive_int(config, "n_layer", "num_hidden_layers", where=where),
            num_attention_heads=heads,
            num_key_value_heads=heads,
            intermediate_size=inner,
            vocab_size=_positive_int(config, "vocab_size", where=where),
            max_position_embeddings=_positive_int(config, "n_positions", "max_position_embeddings", where=where),
            tie_word_embeddings=bool(config.get("tie_word_embeddings", True)),
        )
    hidden = _positive_int(config, "hidden_size", where=where)
    heads = _positive_int(config, "num_attention_heads", where=where)
    kv_heads = config.get("num_key_value_heads") or heads
    if hidden % heads:
        raise ConfigError(f"{where}: hidden_size {hidden} is not divisible by num_attention_heads {heads}")
    return TransformerShape(
        family=family,
        hidden_size=hidden,
        num_layers=_positive_int(config, "num_hidden_layers", where=where),
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        intermediate_size=_positive_int(config, "intermediate_size", where=where),
        vocab_size=_positive_int(config, "vocab_size", where=where),
        max_position_embeddings=_positive_int(config, "max_position_embeddings", where=where),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
    )


def _llama_parameters(shape: TransformerShape, dtype: str) -> list[ParameterInfo]:
    h, head_dim = shape.hidden_size, shape.hidden_size // shape.num_attention_heads
    kv = shape.num_key_value_heads * head_dim
    qkv_bias = shape.family == "qwen2"  # Qwen2 adds biases to q/k/v only
    params = [ParameterInfo(name="model.embed_tokens.weight", shape=[shape.vocab_size, h], dtype=dtype)]
    for i in range(shape.num_layers):
        prefix = f"model.layers.{i}"
        layer = [
            (f"{prefix}.self_attn.q_proj.weight", [h, h]),
            *([(f"{prefix}.self_attn.q_proj.bias", [h])] if qkv_bias else []),
            (f"{prefix}.self_attn.k_proj.weight", [kv, h]),
            *([(f"{prefix}.self_attn.k_proj.bias", [kv])] if qkv_bias else []),
            (f"{prefix}.self_attn.v_proj.weight", [kv, h]),
            *([(f"{prefix}.self_attn.v_proj.bias", [kv])] if qkv_bias else []),
            (f"{prefix}.self_attn.o_proj.weight", [h, h]),
            (f"{prefix}.mlp.gate_proj.weight", [shape.intermediate_size, h]),
            (f"{prefix}.mlp.up_proj.weight", [shape.intermediate_size, h]),
            (f"{prefix}.mlp.down_proj.weight", [h, shape.intermediate_size]),
            (f"{prefix}.input_layernorm.weight", [h]),
            (f"{prefix}.post_attention_layernorm.weight", [h]),
        ]
        params.extend(ParameterInfo(name=name, shape=dims, dtype=dtype) for name, dims in layer)
    params.append(ParameterInfo(name="model.norm.weight", shape=[h], dtype=dtype))
    if not shape.tie_word_embeddings:
        params.append(ParameterInfo(name="lm_head.weight", shape=[shape.vocab_size, h], dtype=dtype))
    return params


def _gpt2_parameters(shape: TransformerShape, dtype: str) -> list[ParameterInfo]:
    # GPT-2 uses Conv1D: weights are [in, out]. The LM head is always tied to wte.
    h, inner = shape.hidden_size, shape.intermediate_size
    params = [
        ParameterInfo(name="transformer.wte.weight", shape=[shape.vocab_size, h], dtype=dtype),
        ParameterInfo(name="transformer.wpe.weight", shape=[shape.max_position_embeddings, h], dtype=dtype),
    ]
    for i in range(shape.num_layers):
        prefix = f"transformer.h.{i}"
        layer = [
            (f"{prefix}.ln_1.weight", [h]),
            (f"{prefix}.ln_1.bias", [h]),
            (f"{prefix}.attn.c_attn.weight", [h, 3 * h]),
            (f"{prefix}.attn.c_attn.bias", [3 * h]),
            (f"{prefix}.attn.c_proj.weight", [h, h]),
            (f"{prefix}.attn.c_proj.bias", [h]),
            (f"{prefix}.ln_2.weight", [h]),
            (f"{prefix}.ln_2.bias", [h]),
            (f"{prefix}.mlp.c_fc.weight", [h, inner]),
            (f"{prefix}.mlp.c_fc.bias", [inner]),
            (f"{prefix}.mlp.c_proj.weight", [inner, h]),
            (f"{prefix}.mlp.c_proj.bias", [h]),
        ]
        params.extend(ParameterInfo(name=name, shape=dims, dtype=dtype) for name, dims in layer)
    params.append(ParameterInfo(name="transformer.ln_f.weight", shape=[h], dtype=dtype))
    params.append(ParameterInfo(name="transformer.ln_f.bias", shape=[h], dtype=dtype))
    return params


def transformer_parameters(shape: TransformerShape, dtype: str = "bfloat16") -> list[ParameterInfo]:
    """Every trainable tensor in registration order (tied embeddings counted once, as PyTorch does)."""
    return _gpt2_parameters(shape, dtype) if shape.family == "gpt2" else _llama_parameters(shape, dtype)


def inventory_from_hf_config(
    config: dict[str, Any], name: str | None = None, where: str = "config.json"
) -> ModelInventory:
    """``where`` is the file (or preset) the config came from; without ``name`` the model is named by
    ``config_model_name``."""
    shape = transformer_shape_from_config(config, where)
    name = name or config_model_name(config, where)
    declared = config.get("torch_dtype") or config.get("dtype")
    dtype = declared if declared in _TORCH_DTYPES else "bfloat16"
    return ModelInventory(
        name=name,
        source_kind="hf_config",
        parameters=transformer_parameters(shape, dtype),
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
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"{path}: not valid JSON ({error})") from None
    # Named from the whole path: a config.json given as ./config.json still has its folder's name.
    name = config_model_name(config, str(path.absolute())) if isinstance(config, dict) else None
    return inventory_from_hf_config(config, name, where=str(path))
