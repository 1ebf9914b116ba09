"""Framework-mode DDP against PyTorch's own DistributedDataParallel on a gloo group of 2 CPU processes:
bucket sizes in launch order (gradient-ready order, frozen parameters skipped) and the buffer
broadcasts before each forward, byte for byte. The audit's cases of issue 18."""

import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

from ddp_world import ddp_step_collectives
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import PlanRequest
from emuplan.workload.hf_config import inventory_from_hf_config
from emuplan.workload.inventory import ModelInventory, SampleSpec
from emuplan.workload.planner import plan_workload
from emuplan.workload.torch_module import inventory_from_module


def planned(inventory: ModelInventory, **options) -> dict[str, list[int]]:
    request = PlanRequest(
        model=inventory.name, strategy="data", mode="framework", gpus=2, param_dtype="float32", **options
    )
    document = plan_workload(request, inventory)
    gradients = [c for c in document.collectives if c.op is CollectiveOp.ALL_REDUCE and c.dtype == "float32"]
    used_map = [c.bytes_total for c in document.collectives if c.op is CollectiveOp.ALL_REDUCE and c.dtype == "int32"]
    return {
        "buckets": [c.bytes_total for c in gradients],
        "broadcasts": [c.bytes_total for c in document.collectives if c.op is CollectiveOp.BROADCAST],
        **({"used_map": used_map} if used_map else {}),
    }


def meta_inventory(build, sample_shape: list[int], dtype: str = "float32") -> ModelInventory:
    with torch.device("meta"):
        model = build()
    return inventory_from_module(model, build.__name__, "test", SampleSpec(shape=sample_shape, dtype=dtype))


# --- a module that registers its head before its body ---------------------------------------------


class HeadFirst(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(2048, 10)
        self.out_proj = nn.Linear(2048, 2048)
        self.body = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 2048))
        self.embed = nn.Embedding(1000, 1024)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.out_proj(self.body(self.embed(tokens))))


def head_first_tokens() -> torch.Tensor:
    return torch.randint(0, 1000, (4,))


def test_buckets_follow_gradient_ready_order_not_reverse_registration() -> None:
    # Reverse registration would bucket the embedding (4096000 B) alone first. Backward completes
    # head, out_proj, body, embed: head + out_proj close the 1 MiB first bucket, the rest is one bucket.
    expected = {"buckets": [81960 + 16785408, 16785408 + 8396800 + 4096000], "broadcasts": []}
    assert planned(meta_inventory(HeadFirst, [], "int64")) == expected
    assert ddp_step_collectives(HeadFirst, head_first_tokens) == expected


def test_find_unused_parameters_keeps_registration_order_even_when_every_parameter_is_used() -> None:
    """find_unused_parameters=True: DDP never rebuilds, so the buckets stay as filled at construction in
    registration order: head + out_proj's weight close the 1 MiB first one; the rest (out_proj's bias, body,
    embed) the second, launched first; then the used-parameter map, 9 × int32."""
    expected = {"buckets": [8192 + 8396800 + 16785408 + 4096000, 81960 + 16777216], "broadcasts": [], "used_map": [36]}
    assert planned(meta_inventory(HeadFirst, [], "int64"), find_unused_parameters=True) == expected
    assert ddp_step_collectives(HeadFirst, head_first_tokens, find_unused_parameters=True) == expected


# --- a frozen backbone ----------------------------------------------------------------------------


class FrozenBackbone(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(4)])
        self.backbone.requires_grad_(False)
        self.head = nn.Sequential(nn.Linear(1024, 1024), nn.Linear(1024, 512), nn.Linear(512, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


def frozen_backbone_input() -> torch.Tensor:
    return torch.randn(2, 1024)


def test_frozen_parameters_have_no_bucket() -> None:
    expected = {"buckets": [2119720, 4198400], "broadcasts": []}  # the audit's numbers; 4 frozen layers add nothing
    assert planned(meta_inventory(FrozenBackbone, [1024])) == expected
    assert ddp_step_collectives(FrozenBackbone, frozen_backbone_input) == expected


# --- BatchNorm buffers (ResNet-18) ---------------------------------------------------------------


class BasicBlock(nn.Module):
    def __init__(self, inputs: int, outputs: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.downsample = None
        if stride != 1 or inputs != outputs:
            self.downsample = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x if self.downsample is None else self.downsample(x)
        return torch.relu(self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))) + shortcut)


class ResNet18(nn.Module):
    """torchvision's resnet18 layout: 20 BatchNorm layers, 4800 channels in all."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        stages, inputs = [], 64
        for outputs, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            stages.append(nn.Sequential(BasicBlock(inputs, outputs, stride), BasicBlock(outputs, outputs, 1)))
            inputs = outputs
        self.layers = nn.Sequential(*stages)
        self.fc = nn.Linear(512, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(torch.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 3, 2, 1))
        return self.fc(torch.flatten(torch.mean(x, dim=(2, 3)), 1))


def resnet_input() -> torch.Tensor:
    return torch.randn(2, 3, 64, 64)


def test_batchnorm_buffers_are_broadcast_every_step() -> None:
    # running_mean + running_var: 4800 channels × 2 × 4 B = 38400 (float32), num_batches_tracked 20 × 8 B = 160
    # (int64): one coalesced broadcast per dtype, 38,560 B per step.
    ours = planned(meta_inventory(ResNet18, [3, 64, 64]))
    assert ours["broadcasts"] == [38400, 160]
    assert ddp_step_collectives(ResNet18, resnet_input) == ours


# --- a HuggingFace Llama config ------------------------------------------------------------------

LLAMA = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1408, "num_hidden_layers": 4,
         "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 32000, "max_position_embeddings": 256,
         "tie_word_embeddings": False}  # fmt: skip


class LlamaLogits(nn.Module):
    """transformers' LlamaForCausalLM returning its logits, so the step's loss reaches every parameter."""

    def __init__(self) -> None:
        super().__init__()
        self.causal_lm = LlamaForCausalLM(LlamaConfig(**{k: v for k, v in LLAMA.items() if k != "model_type"}))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.causal_lm(input_ids=tokens).logits


def llama_tokens() -> torch.Tensor:
    return torch.randint(0, 32000, (1, 8))


def test_hf_llama_buckets_follow_when_layer_norm_gradients_are_ready() -> None:
    # The audit's numbers; reverse registration order gave [65536000, 28325888, 82317312]. The rotary
    # embedding's inv_freq and original_inv_freq (32 float32 each) are buffers DDP broadcasts too.
    expected = {"buckets": [65536000, 28321792, 82321408], "broadcasts": [256]}
    assert planned(inventory_from_hf_config(LLAMA, name="llama-512")) == expected
    assert ddp_step_collectives(LlamaLogits, llama_tokens) == expected
