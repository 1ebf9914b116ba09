"""What a plan can be asked for, as plain data: the planning options' choices, panels, labels, short
help and defaults, and the KCCB export's formats.

``PlanRequest`` (``document``) builds its fields from ``PLAN_OPTIONS``, and ``emuplan plan`` its
options: one description for the CLI, the API and the plan page. Standard library only, so that the
CLI's start-up (``--help`` lists every option) goes without pydantic.
"""

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any


class Mode(StrEnum):
    TUTORIAL = "tutorial"  # the seed tutorials' teaching rules, reproduced exactly
    FRAMEWORK = "framework"  # what PyTorch DDP/FSDP2/DTensor and Megatron put on the wire


class Strategy(StrEnum):
    DATA = "data"
    TENSOR = "tensor"
    PIPELINE = "pipeline"
    HYBRID = "hybrid"


class DataParallelImpl(StrEnum):
    DDP = "ddp"
    FSDP2 = "fsdp2"
    ZERO1 = "zero1"
    ZERO2 = "zero2"
    ZERO3 = "zero3"


class MegatronCore(StrEnum):
    """Megatron-core releases whose MoE all-to-all dispatcher sends different collectives."""

    V0_11 = "0.11"  # and older: the routing probabilities stay on the token's own rank
    CURRENT = "0.16"  # 0.12 onwards (0.16.1 is the current release): the probabilities travel with the tokens


class OptionGroup(StrEnum):
    """Where a planning option sits: a fieldset of the plan page and a panel of ``emuplan plan --help``."""

    MODEL = "Model"
    DATA = "Data"
    LAYOUT = "Layout"
    PARALLELISM = "Parallelism"
    NETWORK = "Network"
    ADVANCED = "Advanced"


@dataclass(frozen=True)
class PlanOption:
    """One ``PlanRequest`` field: ``title`` is its label on the page, ``description`` its short help.
    A ``None`` default means "the model's default" (see ``NormalisedInputs``); ``...``: required."""

    group: OptionGroup
    title: str
    description: str
    default: Any = None
    maximum: float | None = None  # the largest value accepted (see MAXIMA)


PLAN_OPTIONS: dict[str, PlanOption] = {
    "model": PlanOption(
        OptionGroup.MODEL, "Model", "Preset name (see /api/presets) or, on the CLI, a model file.", default=...
    ),
    "mode": PlanOption(
        OptionGroup.MODEL,
        "Mode",
        "The seeds' tutorial rules or what the framework sends. Default: tutorial for the seed MLP.",
    ),
    "dataset_size": PlanOption(OptionGroup.DATA, "Dataset size", "Training samples (sequences for transformers)."),
    "batch_size": PlanOption(OptionGroup.DATA, "Batch size", "Global batch size in samples."),
    "epochs": PlanOption(OptionGroup.DATA, "Epochs", "Passes over the dataset."),
    "drop_last": PlanOption(
        OptionGroup.DATA, "Drop last partial batch", "Floor dataset size / batch size instead of ceil.", default=False
    ),
    "seq_len": PlanOption(OptionGroup.DATA, "Sequence length", "Tokens per sequence (transformers)."),
    "gpus": PlanOption(OptionGroup.LAYOUT, "GPUs", "GPUs in total."),
    "hosts": PlanOption(OptionGroup.LAYOUT, "Hosts", "Hosts the GPUs are spread over."),
    "gpus_per_host": PlanOption(OptionGroup.LAYOUT, "GPUs per host", "GPUs (one NIC each) per host."),
    "strategy": PlanOption(OptionGroup.PARALLELISM, "Strategy", "Parallelism to plan.", default=Strategy.DATA),
    "tp": PlanOption(
        OptionGroup.PARALLELISM, "TP degree", "Tensor-parallel degree. Default: all GPUs for tensor, else 1."
    ),
    "pp": PlanOption(OptionGroup.PARALLELISM, "PP stages", "Pipeline stages. Default: all GPUs for pipeline, else 1."),
    "dp": PlanOption(OptionGroup.PARALLELISM, "DP degree", "Data-parallel degree. Default: GPUs / (TP × PP)."),
    "ep": PlanOption(
        OptionGroup.PARALLELISM,
        "EP degree",
        "Expert-parallel degree (models with experts): ranks that split each layer's experts, carved from DP. "
        "Default: 1.",
    ),
    "dp_impl": PlanOption(
        OptionGroup.PARALLELISM,
        "Data parallel as",
        "Framework data-parallel implementation.",
        default=DataParallelImpl.DDP,
    ),
    "micro_batch": PlanOption(OptionGroup.PARALLELISM, "Micro-batch size", "Samples per micro-batch."),
    "micro_batches": PlanOption(
        OptionGroup.PARALLELISM, "Micro-batches", "Micro-batches per step and data-parallel replica."
    ),
    "sequence_parallel": PlanOption(
        OptionGroup.PARALLELISM,
        "Sequence parallel",
        "Megatron sequence parallel: all-gather/reduce-scatter.",
        default=False,
    ),
    "link_gbps": PlanOption(
        OptionGroup.NETWORK, "Link speed, Gbit/s per rank", "Per-rank link speed for the ideal time.", default=100.0
    ),
    "latency_us": PlanOption(
        OptionGroup.NETWORK, "Latency α, µs", "Per-hop latency α for the ideal time.", default=5.0
    ),
    "bucket_cap_mb": PlanOption(
        OptionGroup.ADVANCED,
        "DDP bucket cap, MiB",
        "DDP bucket_cap_mb. Default: PyTorch's, 1 MiB first, then 25 MiB; when given, the first bucket too.",
    ),
    "param_dtype": PlanOption(
        OptionGroup.ADVANCED, "Parameter dtype", "Parameters' dtype. Default: float32 for the seed MLP, else bfloat16."
    ),
    "grad_dtype": PlanOption(
        OptionGroup.ADVANCED,
        "Gradient dtype",
        "Gradients' dtype. Default: the parameter dtype; float32 for Megatron's DDP (TP on a transformer) unless "
        "--grad-reduce-in-bf16.",
    ),
    "activation_dtype": PlanOption(
        OptionGroup.ADVANCED, "Activation dtype", "Activations' dtype. Default: the parameter dtype."
    ),
    "vocab_parallel_loss": PlanOption(
        OptionGroup.ADVANCED,
        "Vocab-parallel loss",
        "Vocab-parallel cross-entropy (3 small fp32 all-reduces).",
        default=True,
    ),
    "capacity_factor": PlanOption(
        OptionGroup.ADVANCED,
        "Expert capacity factor",
        "Pad each expert's tokens to this × its even share (all-to-all buffers padded). Default: dropless.",
    ),
    "megatron_core": PlanOption(
        OptionGroup.ADVANCED,
        "Megatron-core version",
        "Its MoE dispatcher: from 0.12 the routing probabilities get their own all-to-all.",
        default=MegatronCore.CURRENT,
    ),
    "grad_reduce_in_bf16": PlanOption(
        OptionGroup.ADVANCED,
        "Megatron grads reduced in bf16",
        "Megatron --grad-reduce-in-bf16: main_grad (data-parallel and sequence-parallel layer-norm reductions) in "
        "the parameters' dtype instead of fp32.",
        default=False,
    ),
    "find_unused_parameters": PlanOption(
        OptionGroup.ADVANCED,
        "DDP: find unused parameters",
        "DDP with find_unused_parameters: its buckets are never rebuilt (reverse registration order).",
        default=False,
    ),
    "hot_expert_factor": PlanOption(
        OptionGroup.ADVANCED,
        "Hot-expert factor",
        "Busiest EP rank's tokens ÷ an even share (1 to ep): all-to-alls sized for it.",
        default=1.0,
    ),
    "persistence_threshold": PlanOption(
        OptionGroup.ADVANCED,
        "ZeRO-3 persistence threshold, elements",
        "ZeRO-3's param persistence threshold (DeepSpeed): parameters of at most this many elements are never "
        "gathered for a pass (kept whole, gathered once after each optimizer step). Default: DeepSpeed's 100000.",
    ),
}

# Far beyond any real training run, and small enough that every product the planner forms from them
# (trials = dataset_size / batch_size × epochs, counts per step, byte counts) fits the database's int64.
MAXIMA: dict[str, float] = {
    "dataset_size": 2**40,
    "batch_size": 2**30,
    "epochs": 2**20,
    "seq_len": 2**24,
    "gpus": 2**20,
    "hosts": 2**20,
    "gpus_per_host": 2**10,
    "tp": 2**20,
    "pp": 2**20,
    "dp": 2**20,
    "ep": 2**20,
    "micro_batch": 2**30,
    "micro_batches": 2**20,
    "link_gbps": 1e6,
    "latency_us": 1e9,
    "bucket_cap_mb": 2**20,
    "capacity_factor": 1e3,
    "hot_expert_factor": 2**20,
    "persistence_threshold": 2**40,
}
for _name, _maximum in MAXIMA.items():
    PLAN_OPTIONS[_name] = replace(PLAN_OPTIONS[_name], maximum=_maximum)

# What ``kccb.export_kccb`` writes.
EXPORT_FORMATS = ("yaml", "json", "text")
