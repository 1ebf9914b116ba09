"""HuggingFace configs against ``transformers`` itself: every supported family's parameters (names,
shapes, order), buffers and gradient-ready order equal the model transformers builds from the same
config. Models are built from the config alone (no weights, no hub access, no remote code)."""

import json
import re
from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from emuplan.workload.hf_config import (
    SUPPORTED_MODEL_TYPES,
    ConfigError,
    inventory_from_hf_config,
    read_hf_config,
    transformer_shape_from_config,
)
from emuplan.workload.presets import PRESETS
from paths import MIXTRAL_8X7B_CONFIG

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hf_configs"

_SMALL_LLAMA = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
                "num_key_value_heads": 2, "vocab_size": 100, "max_position_embeddings": 32}  # fmt: skip
_SMALL_MLA = {"q_lora_rank": 24, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 12}
_SMALL_GPT2 = {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100, "n_positions": 32}

FAMILY_CONFIGS = {
    "llama": {"model_type": "llama", **_SMALL_LLAMA},
    "llama, tied": {"model_type": "llama", **_SMALL_LLAMA, "tie_word_embeddings": True},
    "llama, attention_bias + mlp_bias": {
        "model_type": "llama",
        **_SMALL_LLAMA,
        "attention_bias": True,
        "mlp_bias": True,
    },  # fmt: skip
    "llama, head_dim 32": {"model_type": "llama", **_SMALL_LLAMA, "head_dim": 32},
    "mistral, head_dim 8": {"model_type": "mistral", **_SMALL_LLAMA, "head_dim": 8},
    "qwen2": {"model_type": "qwen2", **_SMALL_LLAMA},
    "qwen2, head_dim 24": {"model_type": "qwen2", **_SMALL_LLAMA, "head_dim": 24},
    "gpt2": _SMALL_GPT2,
    "gpt2, untied": {**_SMALL_GPT2, "tie_word_embeddings": False},
    "gpt2, n_inner 80": {**_SMALL_GPT2, "n_inner": 80},
    "mixtral": {"model_type": "mixtral", **_SMALL_LLAMA, "num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen2_moe, shared expert, sparse step 2": {
        "model_type": "qwen2_moe",
        **_SMALL_LLAMA,
        "num_hidden_layers": 4,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 48,
        "decoder_sparse_step": 2,
    },
    "qwen2_moe, mlp_only_layers, no qkv bias": {
        "model_type": "qwen2_moe",
        **_SMALL_LLAMA,
        "num_hidden_layers": 3,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 48,
        "mlp_only_layers": [1],
        "qkv_bias": False,
    },
    "qwen3_moe, head_dim 32": {
        "model_type": "qwen3_moe",
        **_SMALL_LLAMA,
        "head_dim": 32,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
    },
    "deepseek_v2, q_lora_rank null": {
        "model_type": "deepseek_v2",
        **_SMALL_LLAMA,
        "num_hidden_layers": 3,
        **_SMALL_MLA,
        "q_lora_rank": None,
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "n_shared_experts": 2,
        "first_k_dense_replace": 1,
    },
    "deepseek_v3": {
        "model_type": "deepseek_v3",
        **_SMALL_LLAMA,
        "num_hidden_layers": 3,
        **_SMALL_MLA,
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "n_group": 2,
        "topk_group": 1,
        "moe_intermediate_size": 32,
        "n_shared_experts": 1,
        "first_k_dense_replace": 1,
    },
}


def _transformers_model(config: dict, device: str) -> torch.nn.Module:
    hf_config = AutoConfig.for_model(**config)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(hf_config)


@pytest.mark.parametrize("case", FAMILY_CONFIGS)
def test_parameters_and_buffers_equal_transformers_meta_model(case: str) -> None:
    config = FAMILY_CONFIGS[case]
    model = _transformers_model(config, "meta")
    inventory = inventory_from_hf_config(config, name=case)
    assert [(p.name, p.shape) for p in inventory.parameters] == [
        (name, list(p.shape)) for name, p in model.named_parameters()
    ]
    assert [(b.name, b.shape, b.dtype) for b in inventory.buffers] == [
        (name, list(b.shape), str(b.dtype).removeprefix("torch.")) for name, b in model.named_buffers()
    ]


@pytest.mark.parametrize("case", FAMILY_CONFIGS)
def test_gradient_order_is_the_order_backward_completes_gradients(case: str) -> None:
    """DDP's reducer hooks each parameter's gradient accumulator; this is the order those hooks fire."""
    config = FAMILY_CONFIGS[case]
    torch.manual_seed(0)
    model = _transformers_model(config, "cpu")
    ready: list[str] = []
    for name, parameter in model.named_parameters():
        parameter.register_post_accumulate_grad_hook(lambda _p, name=name: ready.append(name))
    tokens = torch.randint(0, config["vocab_size"], (2, 8))
    model(input_ids=tokens, labels=tokens).loss.backward()
    assert inventory_from_hf_config(config, name=case).gradient_order == ready


@pytest.mark.parametrize(
    ("folder", "count"),
    [
        ("Mistral-Nemo-Base-2407", 12_247_782_400),
        ("Llama-2-7b-hf", 6_738_415_616),
        ("Mixtral-8x7B-v0.1", 46_702_792_704),
    ],
)
def test_real_configs_count_what_transformers_builds(folder: str, count: int) -> None:
    path = FIXTURES / folder / "config.json"
    model = _transformers_model(json.loads(path.read_text()), "meta")
    assert sum(p.numel() for p in model.parameters()) == count
    assert read_hf_config(path).parameter_count == count


def test_gpt2_untied_counts_its_own_lm_head() -> None:
    """GPT-2 small with tie_word_embeddings false: 124,439,808 + 50257 × 768 = 163,037,184."""
    config = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257,
              "n_positions": 1024, "tie_word_embeddings": False}  # fmt: skip
    model = _transformers_model(config, "meta")
    assert sum(p.numel() for p in model.parameters()) == 163_037_184
    inventory = inventory_from_hf_config(config, name="gpt2-untied")
    assert inventory.parameter_count == 163_037_184
    assert inventory.parameters[-1].name == "lm_head.weight"


def test_field_the_planner_does_not_understand_is_refused_by_name() -> None:
    config = {"model_type": "llama", **_SMALL_LLAMA, "rope_offset": 3, "attn_logit_softcapping": 50.0}
    with pytest.raises(
        ConfigError,
        match=r"^x.json: field 'attn_logit_softcapping' is not understood by the planner for model_type 'llama' "
        r"\(nor 'rope_offset'\); its parameters cannot be counted exactly$",
    ):
        inventory_from_hf_config(config, name="x", where="x.json")


def test_mixtral_relabelled_as_mistral_is_refused_not_planned_dense(tmp_path: Path) -> None:
    """The real Mixtral-8x7B config with model_type 'mistral' would count 7.24B dense parameters: refused."""
    config = json.loads(MIXTRAL_8X7B_CONFIG.read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config, "model_type": "mistral"}))
    with pytest.raises(
        ConfigError,
        match=rf"^{re.escape(str(path))}: field 'num_experts_per_tok' is not understood by the planner for "
        r"model_type 'mistral' \(nor 'num_local_experts', 'output_router_logits', 'router_aux_loss_coef'\); its "
        r"parameters cannot be counted exactly. "
        r"'num_experts_per_tok', 'num_local_experts' describe a mixture of experts, which 'mistral' models do not "
        r"have: planning it as dense would drop its experts \(families with experts: mixtral, qwen2_moe, "
        r"qwen3_moe, deepseek_v2, deepseek_v3\)$",
    ):
        read_hf_config(path)


@pytest.mark.parametrize(
    ("preset", "count"),
    [("mixtral-8x7b", 46_702_792_704), ("qwen2-57b-a14b", 57_408_658_944), ("deepseek-v3", 671_026_404_352)],
)
def test_moe_presets_count_what_transformers_builds(preset: str, count: int) -> None:
    model = _transformers_model(PRESETS[preset].hf_config, "meta")
    assert sum(p.numel() for p in model.parameters()) == count
    inventory = PRESETS[preset].build()
    assert inventory.parameter_count == count
    assert [p.name for p in inventory.parameters] == [name for name, _ in model.named_parameters()]


def test_expert_layers_follow_each_family_rule() -> None:
    shapes = {case: transformer_shape_from_config(FAMILY_CONFIGS[case]) for case in FAMILY_CONFIGS}
    assert shapes["mixtral"].experts.layers == [0, 1]
    assert shapes["qwen2_moe, shared expert, sparse step 2"].experts.layers == [1, 3]
    assert shapes["qwen2_moe, mlp_only_layers, no qkv bias"].experts.layers == [0, 2]
    assert shapes["deepseek_v3"].experts.layers == [1, 2]
    assert shapes["deepseek_v3"].experts.shared_intermediate_size == 32
    assert shapes["deepseek_v2, q_lora_rank null"].experts.shared_intermediate_size == 64
    assert shapes["llama"].experts is None


def test_expert_count_under_two_names_must_agree() -> None:
    """transformers saves Qwen3-MoE's num_experts as num_local_experts (its attribute_map); both are read."""
    config = {**FAMILY_CONFIGS["qwen3_moe, head_dim 32"], "num_local_experts": 8}
    with pytest.raises(ConfigError, match=r"^c.json: fields 'num_experts' and 'num_local_experts' disagree: 4, 8$"):
        inventory_from_hf_config(config, name="q", where="c.json")


def test_family_fields_are_not_borrowed_across_families() -> None:
    """Mistral's modelling code has no biases: attention_bias in a Mistral config is refused, not ignored."""
    with pytest.raises(ConfigError, match=r"field 'attention_bias' is not understood .* model_type 'mistral'"):
        inventory_from_hf_config({"model_type": "mistral", **_SMALL_LLAMA, "attention_bias": True}, name="m")


def test_cross_attention_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"field 'add_cross_attention' = True is not supported"):
        inventory_from_hf_config({**_SMALL_GPT2, "add_cross_attention": True}, name="g")


def test_every_field_of_transformers_default_configs_is_understood() -> None:
    """A config saved by transformers itself carries every field of its class: none may be refused."""
    for model_type in SUPPORTED_MODEL_TYPES:
        config = AutoConfig.for_model(model_type).to_dict()
        if model_type == "deepseek_v2":
            config["num_experts_per_tok"] = 6  # unset by default; the planner needs it for expert parallelism
        inventory_from_hf_config(config, name=model_type)


def test_bias_flags_must_be_booleans() -> None:
    with pytest.raises(ConfigError, match=r"field 'mlp_bias' must be true or false, got 'yes'"):
        inventory_from_hf_config({"model_type": "llama", **_SMALL_LLAMA, "mlp_bias": "yes"}, name="x")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"num_experts_per_tok": 5}, r"^c.json: field 'num_experts_per_tok' 5 is more than the model's 4 experts$"),
        ({"num_local_experts": 0}, r"^c.json: field 'num_local_experts' must be a positive integer, got 0$"),
        ({"num_local_experts": None}, r"^c.json: missing field 'num_local_experts'$"),
    ],
)
def test_impossible_expert_counts_are_refused(change: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        inventory_from_hf_config({**FAMILY_CONFIGS["mixtral"], **change}, name="m", where="c.json")


def test_expert_layer_lists_must_name_layers() -> None:
    config = {**FAMILY_CONFIGS["qwen3_moe, head_dim 32"], "mlp_only_layers": [0, 7]}
    with pytest.raises(
        ConfigError, match=r"^c.json: field 'mlp_only_layers' must be a list of layer indices 0…1, got \[0, 7\]$"
    ):
        inventory_from_hf_config(config, name="q", where="c.json")
