"""Built-in models: the seeds' FashionMNIST classifier and well-known decoder-only transformers.

Each preset carries the workload it is usually planned with (dataset, batch, cluster, dtypes), so
``emuplan plan --model fashion-mnist-mlp --strategy data`` reproduces the seed without more options.
"""

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

# A preset's inventory imports the model layer (pydantic) when it is built: the CLI's start-up lists
# the presets without it.
if TYPE_CHECKING:
    from emuplan.workload.inventory import ModelInventory


@dataclass(frozen=True)
class WorkloadDefaults:
    """What a plan uses when the request leaves a field out."""

    dataset_size: int
    batch_size: int
    epochs: int
    gpus: int
    gpus_per_host: int
    dtype: str
    tutorial_by_default: bool = False
    seq_len: int | None = None
    micro_batch: int = 1


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    build: Callable[[], "ModelInventory"]
    defaults: WorkloadDefaults
    hf_config: dict | None = None  # the config.json a transformer preset is built from


# The seeds: FashionMNIST train set, batch 8192, one epoch, 4 hosts with one GPU each.
SEED_DEFAULTS = WorkloadDefaults(
    dataset_size=60000, batch_size=8192, epochs=1, gpus=4, gpus_per_host=1, dtype="float32", tutorial_by_default=True
)
# Transformers: 1024 sequences per step, 100 steps, 8 GPUs per host.
TRANSFORMER_STEPS = 100
TRANSFORMER_BATCH = 1024


def transformer_defaults(max_positions: int) -> WorkloadDefaults:
    return WorkloadDefaults(
        dataset_size=TRANSFORMER_BATCH * TRANSFORMER_STEPS,
        batch_size=TRANSFORMER_BATCH,
        epochs=1,
        gpus=8,
        gpus_per_host=8,
        dtype="bfloat16",
        seq_len=min(max_positions, 4096),
    )


# The seeds' Classifier: nn.Linear layers fc1..fc4, ReLU between them, log-softmax on the last.
SEED_LAYER_WIDTHS = (784, 256, 128, 64, 10)


def fashion_mnist_classifier_inventory() -> "ModelInventory":
    """The seeds' ``Classifier`` (784-256-128-64-10) as PyTorch reports it: each ``nn.Linear`` registers
    weight [out, in] then bias [out], outputs [out] per sample, and backward completes its gradients.

    Written out rather than traced so that planning the seed does not import torch (seconds, against
    milliseconds for the plan); the tests check it equals PyTorch's own trace of the seeds' module.
    """
    from emuplan.workload.inventory import ActivationInfo, ModelInventory, ParameterInfo, SampleSpec

    layers = [
        (f"fc{index}", fan_in, fan_out)
        for index, (fan_in, fan_out) in enumerate(itertools.pairwise(SEED_LAYER_WIDTHS), start=1)
    ]
    return ModelInventory(
        name="fashion-mnist-mlp",
        source_kind="preset",
        parameters=[
            ParameterInfo(name=f"{layer}.{kind}", shape=shape)
            for layer, fan_in, fan_out in layers
            for kind, shape in (("weight", [fan_out, fan_in]), ("bias", [fan_out]))
        ],
        # Backward runs fc4 → fc1; autograd hands each Linear's bias gradient over before its weight's.
        gradient_order=[f"{layer}.{kind}" for layer, _, _ in reversed(layers) for kind in ("bias", "weight")],
        activations=[
            ActivationInfo(module=layer, module_type="Linear", shape=[fan_out]) for layer, _, fan_out in layers
        ],
        sample=SampleSpec(shape=[1, 28, 28], dtype="float32", label_shape=[], label_dtype="int64"),
    )


def _transformer_preset(name: str, description: str, config: dict) -> Preset:
    max_positions = config.get("max_position_embeddings") or config["n_positions"]

    def build() -> "ModelInventory":
        from emuplan.workload.hf_config import inventory_from_hf_config

        return inventory_from_hf_config(config, name=name, where=f"preset {name}").model_copy(
            update={"source_kind": "preset"}
        )

    return Preset(
        name=name,
        description=description,
        build=build,
        defaults=transformer_defaults(max_positions),
        hf_config=config,
    )


def _llama_config(hidden, intermediate, layers, heads, kv_heads, vocab, positions, model_type="llama") -> dict:
    return {
        "model_type": model_type,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "vocab_size": vocab,
        "max_position_embeddings": positions,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }


PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in [
        Preset(
            name="fashion-mnist-mlp",
            description="The seeds' classifier 784-256-128-64-10 on FashionMNIST (60000 × 1×28×28 fp32, batch 8192)",
            build=fashion_mnist_classifier_inventory,
            defaults=SEED_DEFAULTS,
        ),
        _transformer_preset(
            "gpt2",
            "GPT-2 small, 124M parameters, 12 layers, hidden 768",
            {
                "model_type": "gpt2",
                "n_embd": 768,
                "n_layer": 12,
                "n_head": 12,
                "vocab_size": 50257,
                "n_positions": 1024,
                "torch_dtype": "float32",
            },
        ),
        _transformer_preset(
            "llama-2-7b", "Llama-2-7B, 32 layers, hidden 4096, MHA", _llama_config(4096, 11008, 32, 32, 32, 32000, 4096)
        ),
        _transformer_preset(
            "llama-3-8b",
            "Llama-3-8B, 32 layers, hidden 4096, GQA 8",
            _llama_config(4096, 14336, 32, 32, 8, 128256, 8192),
        ),
        _transformer_preset(
            "llama-3-70b",
            "Llama-3-70B, 80 layers, hidden 8192, GQA 8",
            _llama_config(8192, 28672, 80, 64, 8, 128256, 8192),
        ),
        _transformer_preset(
            "mistral-7b",
            "Mistral-7B-v0.1, 32 layers, hidden 4096, GQA 8",
            _llama_config(4096, 14336, 32, 32, 8, 32000, 32768, model_type="mistral"),
        ),
        _transformer_preset(
            "qwen2-7b",
            "Qwen2-7B, 28 layers, hidden 3584, GQA 4, q/k/v biases",
            _llama_config(3584, 18944, 28, 28, 4, 152064, 131072, model_type="qwen2"),
        ),
        _transformer_preset(
            "mixtral-8x7b",
            "Mixtral-8x7B-v0.1, 32 layers, hidden 4096, 8 experts, top-2",
            {
                **_llama_config(4096, 14336, 32, 32, 8, 32000, 32768, model_type="mixtral"),
                "num_local_experts": 8,
                "num_experts_per_tok": 2,
            },
        ),
        _transformer_preset(
            "qwen2-57b-a14b",
            "Qwen2-57B-A14B, 28 layers, hidden 3584, 64 experts, top-8, shared expert",
            {
                **_llama_config(3584, 18944, 28, 28, 4, 151936, 131072, model_type="qwen2_moe"),
                "num_experts": 64,
                "num_experts_per_tok": 8,
                "moe_intermediate_size": 2560,
                "shared_expert_intermediate_size": 20480,
            },
        ),
        _transformer_preset(
            "deepseek-v3",
            "DeepSeek-V3, 61 layers (3 dense), hidden 7168, MLA, 256 experts, top-8, 1 shared; "
            "as transformers builds it (no multi-token-prediction layer)",
            {
                **_llama_config(7168, 18432, 61, 128, 128, 129280, 163840, model_type="deepseek_v3"),
                "q_lora_rank": 1536,
                "kv_lora_rank": 512,
                "qk_nope_head_dim": 128,
                "qk_rope_head_dim": 64,
                "v_head_dim": 128,
                "n_routed_experts": 256,
                "num_experts_per_tok": 8,
                "n_group": 8,
                "topk_group": 4,
                "moe_intermediate_size": 2048,
                "n_shared_experts": 1,
                "first_k_dense_replace": 3,
            },
        ),
    ]
}


def workload_defaults(inventory: "ModelInventory") -> WorkloadDefaults:
    """A preset's own defaults; for other sources the transformer or seed set-up by model kind."""
    preset = PRESETS.get(inventory.name)
    if inventory.source_kind == "preset" and preset is not None:
        return preset.defaults
    if inventory.transformer is not None:
        return transformer_defaults(inventory.transformer.max_position_embeddings)
    return WorkloadDefaults(**{**SEED_DEFAULTS.__dict__, "tutorial_by_default": False})
