"""Model sources: presets and HuggingFace config.json give exact parameter counts without weights."""

import json
from pathlib import Path

import pytest
import torch

from emuplan.workload.hf_config import ConfigError, config_model_name, inventory_from_hf_config, read_hf_config
from emuplan.workload.sources import UnknownModelError, resolve_model
from emuplan.workload.torch_module import inventory_from_module
from fixtures.models.seed_classifier import Classifier
from paths import LLAMA_2_7B_CONFIG as LLAMA_2_7B_PATH
from seed_model import assert_is_the_seed_classifier

LLAMA_2_7B_CONFIG = json.loads(LLAMA_2_7B_PATH.read_text())


@pytest.mark.parametrize(
    ("preset", "count"),
    [
        ("gpt2", 124_439_808),
        ("llama-2-7b", 6_738_415_616),
        ("llama-3-8b", 8_030_261_248),
        ("llama-3-70b", 70_553_706_496),
        ("mistral-7b", 7_241_732_096),
        ("qwen2-7b", 7_615_616_512),
        ("fashion-mnist-mlp", 242_762),
    ],
)
def test_preset_parameter_counts_are_exact(preset: str, count: int) -> None:
    assert resolve_model(preset).parameter_count == count


def test_seed_mlp_is_what_pytorch_traces_from_the_seeds_module() -> None:
    inventory = resolve_model("fashion-mnist-mlp")
    assert_is_the_seed_classifier(inventory)
    assert inventory.sample.label_dtype == "int64"
    with torch.device("meta"):
        seed_module = Classifier()
    traced = inventory_from_module(seed_module, name="fashion-mnist-mlp", source_kind="preset", sample=inventory.sample)
    assert inventory.model_dump() == traced.model_dump()


class _TinyLlamaLayer(torch.nn.Module):
    """A HuggingFace-shaped Llama decoder layer (names and shapes as LlamaDecoderLayer registers them)."""

    def __init__(self, hidden: int, kv: int, inner: int) -> None:
        super().__init__()
        self.self_attn = torch.nn.ModuleDict(
            {
                "q_proj": torch.nn.Linear(hidden, hidden, bias=False),
                "k_proj": torch.nn.Linear(hidden, kv, bias=False),
                "v_proj": torch.nn.Linear(hidden, kv, bias=False),
                "o_proj": torch.nn.Linear(hidden, hidden, bias=False),
            }
        )
        self.mlp = torch.nn.ModuleDict(
            {
                "gate_proj": torch.nn.Linear(hidden, inner, bias=False),
                "up_proj": torch.nn.Linear(hidden, inner, bias=False),
                "down_proj": torch.nn.Linear(inner, hidden, bias=False),
            }
        )
        self.input_layernorm = torch.nn.RMSNorm(hidden)
        self.post_attention_layernorm = torch.nn.RMSNorm(hidden)


def test_llama_formula_matches_a_meta_device_build_of_a_small_equivalent() -> None:
    config = {**LLAMA_2_7B_CONFIG, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 3,
              "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 100}  # fmt: skip
    with torch.device("meta"):
        model = torch.nn.Module()
        model.model = torch.nn.Module()
        model.model.embed_tokens = torch.nn.Embedding(100, 64)
        model.model.layers = torch.nn.ModuleList(_TinyLlamaLayer(64, 16, 160) for _ in range(3))
        model.model.norm = torch.nn.RMSNorm(64)
        model.lm_head = torch.nn.Linear(64, 100, bias=False)
    expected = [(name, list(p.shape)) for name, p in model.named_parameters()]
    inventory = inventory_from_hf_config(config, name="tiny")
    assert [(p.name, p.shape) for p in inventory.parameters] == expected


def test_config_json_file_is_read_and_named_after_its_model() -> None:
    inventory = resolve_model(str(LLAMA_2_7B_PATH))
    assert inventory.name == "LlamaForCausalLM"  # the file has no _name_or_path
    assert inventory.source_kind == "hf_config"
    assert inventory.parameter_count == 6_738_415_616
    assert inventory.parameters[0].dtype == "float16"


def test_unknown_model_type_names_the_supported_ones() -> None:
    with pytest.raises(ConfigError, match=r"unsupported model_type 'bert'; supported: llama, mistral, qwen2, gpt2"):
        inventory_from_hf_config({**LLAMA_2_7B_CONFIG, "model_type": "bert"}, name="x")


def test_missing_field_is_named() -> None:
    config = {k: v for k, v in LLAMA_2_7B_CONFIG.items() if k != "intermediate_size"}
    with pytest.raises(ConfigError, match=r"config.json: missing field 'intermediate_size'"):
        inventory_from_hf_config(config, name="x")


def test_malformed_json_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match=r"config.json: not valid JSON"):
        read_hf_config(path)


def test_non_positive_field_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"field 'num_hidden_layers' must be a positive integer, got 0"):
        inventory_from_hf_config({**LLAMA_2_7B_CONFIG, "num_hidden_layers": 0}, name="x")


def test_unknown_model_lists_presets_and_files_only_when_allowed() -> None:
    with pytest.raises(
        UnknownModelError, match=r"expected a preset \(fashion-mnist-mlp, gpt2.*or a file ending in .json"
    ):
        resolve_model("llama-9000")
    with pytest.raises(UnknownModelError) as error:
        resolve_model("/etc/config.json", allow_files=False)
    assert ".json" not in str(error.value).split("expected")[1]


@pytest.mark.parametrize(
    ("fields", "file_name", "name"),
    [
        ({"_name_or_path": "meta-llama/Llama-2-7b-hf", "architectures": ["LlamaForCausalLM"]}, "data/config.json",
         "meta-llama/Llama-2-7b-hf"),
        ({"_name_or_path": "/home/me/checkpoints/llama-ft/", "architectures": ["LlamaForCausalLM"]}, "x/config.json",
         "llama-ft"),
        ({"_name_or_path": "", "architectures": ["LlamaForCausalLM"]}, "data/config.json", "LlamaForCausalLM"),
        ({"architectures": []}, "data/config.json", "data/config.json"),
        ({}, "config.json", "config.json"),
    ],
)  # fmt: skip
def test_a_config_is_named_after_its_model_not_its_folder(fields: dict, file_name: str, name: str) -> None:
    config = {key: value for key, value in LLAMA_2_7B_CONFIG.items() if key != "architectures"} | fields
    assert config_model_name(config, file_name) == name
    assert inventory_from_hf_config(config, where=file_name).name == name


def test_a_config_file_read_from_disk_takes_the_models_name(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "config.json").write_text(LLAMA_2_7B_PATH.read_text())
    assert read_hf_config(folder / "config.json").name == "LlamaForCausalLM"
    config = {k: v for k, v in LLAMA_2_7B_CONFIG.items() if k != "architectures"}
    (folder / "config.json").write_text(json.dumps(config))
    assert read_hf_config(folder / "config.json").name == "data/config.json"
