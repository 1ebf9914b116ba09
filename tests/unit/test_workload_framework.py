"""Framework mode against PyTorch itself: DDP's bucket assignment, and the collectives FSDP2 and
DTensor really issue, recorded on one CPU process through PyTorch's fake process group."""

from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.nn.parallel.distributed import _BucketCapacityConfig
from torch.testing._internal.distributed.fake_pg import FakeStore
from torch.utils._python_dispatch import TorchDispatchMode

from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import PlanningError, PlanRequest
from emuplan.workload.inventory import SampleSpec
from emuplan.workload.planner import plan_workload
from emuplan.workload.sources import resolve_model
from emuplan.workload.strategies.common import parameter_units
from emuplan.workload.strategies.data_parallel import ddp_buckets
from emuplan.workload.torch_module import inventory_from_module

SEED = "fashion-mnist-mlp"


def framework(model: str = SEED, **options):
    return plan_workload(PlanRequest(model=model, mode="framework", **options), resolve_model(model))


def sizes(document, op: CollectiveOp, phase: str | None = None) -> list[int]:
    return [c.bytes_total for c in document.collectives if c.op is op and (phase is None or c.phase.value == phase)]


class CollectiveLog(TorchDispatchMode):
    """Records (op, bytes of the full buffer) for every c10d collective dispatched."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket).split(".")[-1]
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if name in ("_allgather_base_", "_reduce_scatter_base_", "all_reduce"):
            # _allgather_base_(output, input), _reduce_scatter_base_(output, input): the larger is the whole buffer.
            self.calls.append((name, max(t.numel() * t.element_size() for t in tensors)))
        return func(*args, **(kwargs or {}))


@pytest.fixture
def fake_world() -> Iterator:
    def start(world_size: int) -> None:
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)

    yield start
    if dist.is_initialized():
        dist.destroy_process_group()


class SeedClassifier(nn.Module):
    def __init__(self, widths=(784, 256, 128, 64, 10)) -> None:
        super().__init__()
        self.layers = [f"fc{i + 1}" for i in range(len(widths) - 1)]
        for name, (fan_in, fan_out) in zip(self.layers, zip(widths, widths[1:], strict=False), strict=True):
            setattr(self, name, nn.Linear(fan_in, fan_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.view(x.shape[0], -1)
        for name in self.layers:
            x = torch.relu(getattr(self, name)(x))
        return x


# --- DDP ---------------------------------------------------------------------------------------


def _torch_bucket_bytes(model: nn.Module, bucket_cap_mb: float | None) -> list[int]:
    """The buckets DDP rebuilds after iteration 0, with the limits DDP itself derives from bucket_cap_mb."""
    params = list(reversed(list(model.parameters())))
    config = _BucketCapacityConfig.create(bucket_cap_mb, None, use_python_reducer=False)
    limits = [config.first_bucket_bytes_cap, config.bucket_bytes_cap]
    buckets, _ = dist._compute_bucket_assignment_by_size(params, limits)
    return [sum(params[i].numel() * params[i].element_size() for i in bucket) for bucket in buckets]


@pytest.mark.parametrize("bucket_cap_mb", [None, 25.0, 10.0, 5.0, 1.0])
def test_ddp_buckets_equal_pytorchs_assignment(bucket_cap_mb: float | None) -> None:
    with torch.device("meta"):
        stack = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(6)], nn.Linear(1024, 10))
    inventory = inventory_from_module(stack, "stack", "test", SampleSpec(shape=[1024]))
    ours = [
        sum(p.nbytes for p in bucket)
        for bucket in ddp_buckets(inventory.gradient_ready_parameters(), "float32", bucket_cap_mb)
    ]
    assert ours == _torch_bucket_bytes(stack, bucket_cap_mb)


def test_ddp_stack_gives_the_documented_buckets() -> None:
    with torch.device("meta"):
        stack = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(6)], nn.Linear(1024, 10))
    inventory = inventory_from_module(stack, "stack", "test", SampleSpec(shape=[1024]))
    assert [sum(p.nbytes for p in b) for b in ddp_buckets(inventory.gradient_ready_parameters(), "float32", None)] == [
        4239400,
        20992000,
    ]
    # An explicit bucket_cap_mb caps the first bucket too: 10 MiB gives two buckets, not three.
    assert [sum(p.nbytes for p in b) for b in ddp_buckets(inventory.gradient_ready_parameters(), "float32", 10)] == [
        12636200,
        12595200,
    ]


def test_ddp_seed_is_one_bucket_of_all_gradients() -> None:
    document = framework(strategy="data", bucket_cap_mb=25)
    assert sizes(document, CollectiveOp.ALL_REDUCE) == [971048]
    with torch.device("meta"):
        seed = SeedClassifier()
    assert _torch_bucket_bytes(seed, None) == [971048]
    assert document.kccb.algorithm == "ALGO_ALL_REDUCE_UNIDIRECTIONAL_RING"


def test_ddp_on_llama_buckets_cover_every_gradient_once() -> None:
    document = framework("llama-2-7b", strategy="data", gpus=16)
    assert sum(sizes(document, CollectiveOp.ALL_REDUCE)) == 6_738_415_616 * 2
    assert [c.label for c in document.collectives[:2]] == [
        "buffers from rank 0 (2 × float32: model.rotary_emb.inv_freq …)",
        "bucket 0 (lm_head.weight)",
    ]


# --- FSDP2 / ZeRO -----------------------------------------------------------------------------------


def test_fsdp2_seed_at_four_gpus_pads_fc4_to_3120_bytes() -> None:
    document = framework(strategy="data", dp_impl="fsdp2")
    assert sizes(document, CollectiveOp.ALL_GATHER, "forward") == [803840, 131584, 33024, 3120]
    assert sizes(document, CollectiveOp.ALL_GATHER, "backward") == [3120, 33024, 131584, 803840]
    assert sizes(document, CollectiveOp.REDUCE_SCATTER) == [3120, 33024, 131584, 803840]
    gather, scatter = document.kccb
    assert (gather.algorithm, gather.data_sizes) == ("ALGO_ALL_GATHER_RING", [200960, 32896, 8256, 780])
    assert scatter.algorithm == "ALGO_REDUCE_SCATTER_RING"
    assert document.kccb_trials == 2


def _fully_shard_calls(model: SeedClassifier) -> list[tuple[str, int]]:
    """What FSDP2 issues for one step of ``model`` with each layer and the root sharded."""
    for name in model.layers:
        fully_shard(getattr(model, name))
    fully_shard(model)
    log = CollectiveLog()
    with log:
        model(torch.randn(8, 1, 28, 28)).sum().backward()
    return log.calls


def _as_fsdp2_calls(document) -> list[tuple[str, int]]:
    return [("_allgather_base_" if c.op is CollectiveOp.ALL_GATHER else "_reduce_scatter_base_", c.bytes_total)
            for c in document.collectives]  # fmt: skip


@pytest.mark.parametrize("world_size", [3, 4, 8])
def test_fsdp2_collectives_equal_what_fully_shard_issues(fake_world, world_size: int) -> None:
    fake_world(world_size)
    calls = _fully_shard_calls(SeedClassifier())
    document = framework(strategy="data", dp_impl="fsdp2", gpus=world_size, hosts=world_size)
    assert _as_fsdp2_calls(document) == calls


def test_fsdp2_reduce_scatters_only_trainable_parameters(fake_world) -> None:
    """A frozen fc1 is still gathered (forward and backward) but has no gradients to reduce-scatter."""
    fake_world(4)
    with torch.device("meta"):
        meta_model = SeedClassifier()
    meta_model.fc1.requires_grad_(False)
    inventory = inventory_from_module(meta_model, "frozen-fc1", "test", SampleSpec(shape=[1, 28, 28]))
    model = SeedClassifier()
    model.fc1.requires_grad_(False)
    calls = _fully_shard_calls(model)
    request = PlanRequest(model="frozen-fc1", mode="framework", strategy="data", dp_impl="fsdp2", gpus=4)
    document = plan_workload(request, inventory)
    assert _as_fsdp2_calls(document) == calls
    assert sizes(document, CollectiveOp.REDUCE_SCATTER) == [3120, 33024, 131584]


def test_zero_stages_move_two_or_three_times_the_parameters() -> None:
    zero2 = framework(strategy="data", dp_impl="zero2")
    assert sizes(zero2, CollectiveOp.REDUCE_SCATTER) == [971056]  # 242762 rounded up to a multiple of 4, fp32
    assert sizes(zero2, CollectiveOp.ALL_GATHER, "optimizer") == [971056]
    # Without persistent parameters every unit is gathered: fc4's 650 elements padded to 652, fp32.
    everything = framework(strategy="data", dp_impl="zero3", persistence_threshold=0)
    assert sizes(everything, CollectiveOp.ALL_GATHER, "forward") == [803840, 131584, 33024, 2608]
    assert len(sizes(everything, CollectiveOp.ALL_GATHER)) + len(sizes(everything, CollectiveOp.REDUCE_SCATTER)) == 12
    assert sizes(everything, CollectiveOp.ALL_GATHER, "optimizer") == []


def test_zero3_never_gathers_parameters_below_deepspeed_s_persistence_threshold() -> None:
    """DeepSpeed's stage3_param_persistence_threshold, 100,000 elements by default (deepspeed/runtime/zero/config.py;
    ``param.ds_numel <= param_threshold`` in parameter_offload.py): of the seed MLP only fc1's 200,704-element weight
    is gathered for a pass; fc1's bias and fc2-fc4 stay whole and are gathered once after the optimizer step
    (stage3.py ``_post_step``), each padded to a multiple of 4 ranks: 256 + 32768 + 128 + 8192 + 64 + 640 + 12
    elements, fp32. Their gradients are reduce-scattered as before."""
    zero3 = framework(strategy="data", dp_impl="zero3")
    assert zero3.inputs.persistence_threshold == 100_000
    assert sizes(zero3, CollectiveOp.ALL_GATHER, "forward") == [200704 * 4]
    assert sizes(zero3, CollectiveOp.ALL_GATHER, "backward") == [200704 * 4]
    assert sizes(zero3, CollectiveOp.ALL_GATHER, "optimizer") == [42060 * 4]
    assert sizes(zero3, CollectiveOp.REDUCE_SCATTER) == [2608, 33024, 131584, 803840]
    assert any(note.startswith("ZeRO-3 keeps the 7 parameters of at most 100,000 elements (42,058 elements in all)")
               for note in zero3.notes)  # fmt: skip
    # Settable: at 250,000 fc1's weight stays whole too, and nothing is gathered for a pass.
    larger = framework(strategy="data", dp_impl="zero3", persistence_threshold=250_000)
    assert sizes(larger, CollectiveOp.ALL_GATHER) == [(200704 + 42060) * 4]
    with pytest.raises(PlanningError, match=r"^persistence_threshold: DeepSpeed's stage3_param_persistence_thre"):
        framework(strategy="data", dp_impl="zero2", persistence_threshold=10)


@pytest.mark.parametrize("dp_impl", ["zero2", "zero3"])
def test_zero_2_and_3_with_pipeline_parallelism_are_refused_as_deepspeed_refuses_them(dp_impl: str) -> None:
    """deepspeed/runtime/pipe/engine.py, PipelineEngine.__init__: ``assert self.zero_optimization_stage() <
    ZeroStageEnum.gradients, "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"``."""
    with pytest.raises(PlanningError) as refused:
        framework("gpt2", strategy="hybrid", pp=2, dp=2, dp_impl=dp_impl)
    assert str(refused.value) == (
        f"dp_impl: DeepSpeed refuses {dp_impl} with pipeline parallelism (pp 2): its PipelineEngine asserts "
        '"ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism" (deepspeed/runtime/pipe/engine.py); plan '
        "zero1, or fsdp2 as torch.distributed.pipelining drives it"
    )
    assert framework("gpt2", strategy="hybrid", pp=2, dp=2, dp_impl="zero1").stages


@pytest.mark.parametrize(
    ("dp_impl", "counts", "why"),
    [
        # DeepSpeed's engine.allreduce_gradients: ZeRO-1 reduces only at the gradient-accumulation boundary,
        # ZeRO-2 and ZeRO-3 in every micro-batch (their no_sync is refused); the updated parameters of ZeRO-1/2
        # are gathered once, after the optimizer step.
        ("zero1", {("reduce_scatter", "backward"): 1, ("all_gather", "optimizer"): 1}, "ZeRO-1 reduces only"),
        ("zero2", {("reduce_scatter", "backward"): 4, ("all_gather", "optimizer"): 1}, "ZeRO-2 reduces in every"),
        (
            "zero3",
            {
                ("all_gather", "forward"): 4,
                ("all_gather", "backward"): 4,
                ("reduce_scatter", "backward"): 4,
                ("all_gather", "optimizer"): 1,
            },  # fc1's weight gathered per pass, the persistent rest once
            "ZeRO-3 reduces in every",
        ),
        ("ddp", {("all_reduce", "backward"): 1}, "DDP with no_sync on all but the last micro-batch"),
    ],
)
def test_gradient_accumulation_counts_what_each_implementation_sends_per_micro_batch(
    dp_impl: str, counts: dict, why: str
) -> None:
    document = framework(strategy="data", dp_impl=dp_impl, micro_batches=4)
    assert {(c.op.value, c.phase.value): c.count_per_step for c in document.collectives} == counts
    [note] = [note for note in document.notes if note.startswith("Gradient accumulation over 4 micro-batches")]
    assert why in note
    assert not any(n.startswith("Gradient accumulation") for n in framework(strategy="data", dp_impl=dp_impl).notes)


# --- Tensor parallel --------------------------------------------------------------------------------


def test_dtensor_seed_at_four_gpus() -> None:
    document = framework(strategy="tensor", gpus=4, batch_size=8192)
    assert sizes(document, CollectiveOp.ALL_REDUCE, "forward") == [4194304, 327680]
    assert sizes(document, CollectiveOp.ALL_REDUCE, "backward") == [4194304]


@pytest.mark.parametrize("widths", [(784, 256, 128, 64, 10), (32, 48, 24)])
def test_dtensor_collectives_equal_what_parallelize_module_issues(fake_world, widths) -> None:
    fake_world(4)
    model = SeedClassifier(widths)
    plan = {name: ColwiseParallel() if i % 2 == 0 else RowwiseParallel() for i, name in enumerate(model.layers)}
    if len(model.layers) % 2:
        plan[model.layers[-1]] = ColwiseParallel(output_layouts=Replicate())
    parallelize_module(model, init_device_mesh("cpu", (4,)), plan)
    log = CollectiveLog()
    batch = 64
    with log:
        model(torch.randn(batch, widths[0])).sum().backward()
    with torch.device("meta"):
        meta_model = SeedClassifier(widths)
    inventory = inventory_from_module(meta_model, "mlp", "test", SampleSpec(shape=[widths[0]]))
    document = plan_workload(
        PlanRequest(model="mlp", mode="framework", strategy="tensor", gpus=4, batch_size=batch), inventory
    )
    ours = [(c.op.value, c.bytes_total) for c in document.collectives]
    theirs = [("all_gather" if name == "_allgather_base_" else name, size) for name, size in log.calls]
    assert ours == theirs


def test_megatron_tensor_parallel_on_llama() -> None:
    document = framework("llama-2-7b", strategy="tensor", gpus=8, seq_len=4096, micro_batch=1, batch_size=8)
    activation = 1 * 4096 * 4096 * 2  # b·s·h bf16
    layers = [c for c in document.collectives if "per layer" in c.label]
    assert [(c.op, c.phase.value, c.bytes_total, c.count_per_step) for c in layers] == [
        (CollectiveOp.ALL_REDUCE, "forward", activation, 2 * 32 * 8),
        (CollectiveOp.ALL_REDUCE, "backward", activation, 2 * 32 * 8),
    ]
    loss = [c for c in document.collectives if "cross-entropy" in c.label]
    assert [(c.bytes_total, c.dtype, c.count_per_step) for c in loss] == [(4096 * 4, "float32", 3 * 8)]
    assert document.kccb.hosts == 1 and document.kccb.gpus_per_host == 8


def test_sequence_parallel_turns_all_reduces_into_gathers_and_scatters() -> None:
    document = framework("llama-2-7b", strategy="tensor", gpus=8, seq_len=4096, batch_size=8, sequence_parallel=True)
    per_layer = [c for c in document.collectives if "per layer" in c.label]
    assert {c.op for c in per_layer} == {CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER}
    assert {c.bytes_total for c in per_layer} == {4096 * 4096 * 2}
    assert {c.bytes_per_rank for c in per_layer} == {4096 * 4096 * 2 // 8}


def test_sequence_parallel_backward_gathers_for_embedding_and_lm_head() -> None:
    """Megatron-LM with sequence parallel: the embedding's reduce-scatter all-gathers in backward
    (tensor_parallel/mappings.py, _ReduceScatterToSequenceParallelRegion.backward); the column-parallel
    LM head re-gathers its input for the weight gradient and reduce-scatters the input gradient
    (tensor_parallel/layers.py, LinearWithGradAccumulationAndAsyncCommunication.backward)."""
    document = framework("llama-2-7b", strategy="tensor", gpus=8, seq_len=4096, batch_size=8, sequence_parallel=True)
    activation = 4096 * 4096 * 2
    edges = [(c.op, c.phase.value, c.bytes_total, c.count_per_step) for c in document.collectives
             if "embedding" in c.label or "LM head input" in c.label]  # fmt: skip
    assert edges == [
        (CollectiveOp.REDUCE_SCATTER, "forward", activation, 8),
        (CollectiveOp.ALL_GATHER, "forward", activation, 8),
        (CollectiveOp.ALL_GATHER, "backward", activation, 8),
        (CollectiveOp.REDUCE_SCATTER, "backward", activation, 8),
        (CollectiveOp.ALL_GATHER, "backward", activation, 8),
    ]


def test_learned_position_embeddings_make_megatron_all_reduce_the_embedding_under_sequence_parallel() -> None:
    """megatron/core/models/common/embeddings/language_model_embedding.py, LanguageModelEmbedding: with
    learned absolute positions reduce_scatter_embeddings is False, so the word embedding all-reduces its
    output, the positions are added to the whole sequence, and scatter_to_sequence_parallel_region splits
    it locally (no collective forward; its backward all-gathers). GPT-2, one 1024-token sequence, bf16."""
    gpt2 = framework("gpt2", strategy="tensor", gpus=2, seq_len=1024, batch_size=2, sequence_parallel=True)
    embedding = [(c.op, c.phase.value, c.bytes_total, c.bytes_per_rank) for c in gpt2.collectives
                 if "embedding output" in c.label]  # fmt: skip
    assert embedding == [
        (CollectiveOp.ALL_REDUCE, "forward", 1_572_864, 1_572_864),
        (CollectiveOp.ALL_GATHER, "backward", 1_572_864, 786_432),
    ]


def test_sequence_parallel_all_reduces_layer_norm_gradients_once_per_step() -> None:
    """megatron/core/distributed/finalize_model_grads.py, _allreduce_non_tensor_model_parallel_grads
    (_allreduce_layernorm_grads in older releases): with sequence parallel, the gradients of every parameter
    marked sequence_parallel (layer norms, row-parallel biases) are flattened into one all-reduce over the TP
    group per step. It reduces main_grad, which
    bf16 training keeps in fp32 (megatron/training/arguments.py turns on
    accumulate_allreduce_grads_in_fp32 unless --grad-reduce-in-bf16)."""
    options = dict(strategy="tensor", gpus=4, seq_len=4096, batch_size=4, sequence_parallel=True)
    document = framework("llama-3-8b", **options)
    norms = [c for c in document.collectives if "layer-norm" in c.label]
    # Llama-3-8B at TP 4: 32 layers × 2 RMSNorm weights + the final norm, 4096 each: 266,240 fp32 gradients.
    assert [(c.op, c.phase.value, c.bytes_total, c.dtype, c.count_per_step) for c in norms] == [
        (CollectiveOp.ALL_REDUCE, "backward", 1_064_960, "float32", 1)
    ]
    in_bf16 = framework("llama-3-8b", **options, grad_reduce_in_bf16=True)
    assert [(c.bytes_total, c.dtype) for c in in_bf16.collectives if "layer-norm" in c.label] == [(532_480, "bfloat16")]
    gpt2 = framework("gpt2", strategy="tensor", gpus=4, seq_len=1024, batch_size=4, sequence_parallel=True)
    # GPT-2: ln_1, ln_2 (weight + bias) and the two row-parallel c_proj biases per layer, then ln_f; fp32.
    assert [c.bytes_total for c in gpt2.collectives if "layer-norm" in c.label] == [(12 * 6 + 2) * 768 * 4]
    assert not [c for c in framework("llama-2-7b", strategy="tensor", gpus=8).collectives if "layer-norm" in c.label]


@pytest.mark.parametrize(
    ("model", "tp", "message"),
    [
        ("gpt2", 8, "num_attention_heads 12 is not divisible by tp 8"),
        ("llama-3-8b", 16, "num_key_value_heads 8 is not divisible by tp 16"),
    ],
)
def test_megatron_refuses_tp_degrees_that_split_heads(model: str, tp: int, message: str) -> None:
    """megatron/core/transformer/attention.py: num_attention_heads and num_query_groups are each
    divide()d by the TP size, which asserts divisibility."""
    with pytest.raises(PlanningError, match=rf"^tp: Megatron splits attention heads .*{message}$"):
        framework(model, strategy="tensor", gpus=tp)


def test_vocabulary_is_padded_to_128_times_tp_in_the_tp_shard() -> None:
    """GPT-2 at tp 4: 50257 → 50688 (a multiple of 512); each rank holds 12672 rows of wte."""
    document = framework("gpt2", strategy="hybrid", tp=4, dp=2, gpus=8, grad_dtype="float32")
    buckets = [c for c in document.collectives if c.parallel_dim.value == "dp"]
    shard_bytes = sum(c.bytes_total for c in buckets)
    layer = 4 * 768 + (768 * 2304 + 2304) // 4 + 768 * 768 // 4 + 768 + (768 * 3072 + 3072) // 4 + 3072 * 768 // 4 + 768
    assert shard_bytes == 4 * (50688 // 4 * 768 + 1024 * 768 + 12 * layer + 2 * 768)


# --- Pipeline and hybrid ---------------------------------------------------------------------------


def test_pipeline_sends_boundary_activations_two_m_p_minus_one_times() -> None:
    """Each stage lists the transfers it sends or receives, so every one of the 2·m·(p − 1) appears in two stages;
    stage 1 (fc1's 256-wide output in, fc2's 128-wide out) moves the most and bounds the step."""
    document = framework(strategy="pipeline", gpus=4, micro_batches=8)
    micro_batch = 8192 // 8

    def forward_sends(items) -> list[int]:
        return [c.bytes_total for c in items if c.op is CollectiveOp.SEND_RECV and c.phase.value == "forward"]

    transfers = [c.count_per_step for s in document.stages for c in s.collectives if c.op is CollectiveOp.SEND_RECV]
    assert sum(transfers) == 2 * (2 * 8 * (4 - 1))
    assert [forward_sends(stage.collectives) for stage in document.stages] == [
        [micro_batch * 256 * 4],
        [micro_batch * 256 * 4, micro_batch * 128 * 4],
        [micro_batch * 128 * 4, micro_batch * 64 * 4],
        [micro_batch * 64 * 4],
    ]
    assert [stage.bounds_step for stage in document.stages] == [False, True, False, False]
    assert document.collectives == document.stages[1].collectives
    assert document.pipeline_bubble == pytest.approx(3 / 8)
    assert document.kccb.algorithm == "ALGO_BROADCAST_PARALLEL"


def test_hybrid_llama_3_70b_groups_tp_innermost_then_pp_then_dp() -> None:
    document = framework("llama-3-70b", strategy="hybrid", tp=8, pp=8, dp=16, seq_len=8192, micro_batch=1)
    assert (document.inputs.gpus, document.inputs.hosts, document.inputs.gpus_per_host) == (1024, 128, 8)
    assert document.inputs.micro_batches == 1024 // 16
    trials = {(t.parallel_dim.value, t.algorithm): (t.group_size, t.hosts, t.gpus_per_host) for t in document.kccb}
    assert trials == {
        ("tp", "ALGO_ALL_REDUCE_UNIDIRECTIONAL_RING"): (8, 1, 8),
        ("pp", "ALGO_BROADCAST_PARALLEL"): (2, 2, 1),
        ("dp", "ALGO_ALL_REDUCE_UNIDIRECTIONAL_RING"): (16, 16, 1),
    }
    assert document.kccb_trials == 3
    # A middle stage bounds the step: its activations and gradients go both ways, 2 × 2 × 64 transfers.
    assert [stage.bounds_step for stage in document.stages] == [False, True, *[False] * 6]
    sends = [c for c in document.collectives if c.op is CollectiveOp.SEND_RECV]
    assert sum(c.count_per_step for c in sends) == 4 * 64
    assert {c.bytes_total for c in sends} == {8192 * 8192 * 2}
    assert document.pipeline_bubble == pytest.approx(7 / 64)
    # The last stage's DP all-reduces one TP shard of 10 layers + final norm + LM head, split 8 ways;
    # Megatron pads the vocabulary 128256 to a multiple of 128 × tp = 1024: 129024. Megatron's DDP reduces
    # main_grad, float32 in bf16 training unless --grad-reduce-in-bf16.
    layer = 2 * 8192 * 8192 + 2 * 1024 * 8192 + 3 * 28672 * 8192
    shard = 10 * (layer // 8 + 2 * 8192) + 8192 + 129024 // 8 * 8192

    def dp_bytes(document) -> int:
        return sum(c.bytes_total for c in document.stages[-1].collectives if c.parallel_dim.value == "dp")

    assert (dp_bytes(document), document.inputs.grad_dtype) == (4 * shard, "float32")
    assert any(
        note.startswith("Megatron's DDP reduces the gradients as main_grad, here float32") for note in document.notes
    )
    in_bf16 = framework("llama-3-70b", strategy="hybrid", tp=8, pp=8, dp=16, seq_len=8192, micro_batch=1,
                        grad_reduce_in_bf16=True)  # fmt: skip
    assert (dp_bytes(in_bf16), in_bf16.inputs.grad_dtype) == (2 * shard, "bfloat16")


def test_every_preset_plans_every_strategy_in_framework_mode() -> None:
    for preset in ("fashion-mnist-mlp", "gpt2", "llama-3-8b", "mistral-7b", "qwen2-7b"):
        # tp 4: GPT-2's 12 and Qwen2-7B's 28 attention heads do not split over 8 ranks (refused, see below).
        for strategy, options in (("data", {}), ("tensor", {"gpus": 4}), ("pipeline", {"pp": 2}),
                                  ("hybrid", {"tp": 2, "pp": 2, "dp": 2})):  # fmt: skip
            document = framework(preset, strategy=strategy, **options)
            assert document.collectives, (preset, strategy)
            assert all(c.ideal_time_us > 0 for c in document.collectives)


def test_tied_embeddings_across_stages_add_one_embedding_all_reduce() -> None:
    document = framework("gpt2", strategy="pipeline", pp=2, gpus=2, batch_size=8, micro_batch=1, grad_dtype="bfloat16")
    tied = [c for c in document.collectives if "tied word-embedding" in c.label]
    # Megatron-LM pads GPT-2's 50257 tokens to a multiple of --make-vocab-size-divisible-by 128 (× tp 1):
    # 50304 × 768 × 2 B (megatron/training/tokenizer/tokenizer.py, _vocab_size_with_padding).
    assert [(c.op, c.bytes_total, c.group_size) for c in tied] == [(CollectiveOp.ALL_REDUCE, 77_266_944, 2)]
    assert document.inputs.micro_batches == 8


def test_micro_batches_and_batch_size_fit_together() -> None:
    document = framework("llama-3-8b", strategy="hybrid", tp=8, pp=4, dp=2, micro_batch=2, micro_batches=16)
    assert (document.inputs.batch_size, document.inputs.dataset_size) == (2 * 16 * 2, 2 * 16 * 2 * 100)
    with pytest.raises(ValueError, match=r"^micro_batch: 600 is more than the 512 samples each of the 2 data-parallel"):
        framework("llama-3-8b", strategy="hybrid", tp=8, pp=4, dp=2, micro_batch=600)


def test_parameter_units_follow_numbered_layers_or_owning_modules() -> None:
    units = parameter_units(resolve_model("gpt2"))
    assert [u.name for u in units[:3]] == ["root", "transformer.h.0", "transformer.h.1"]
    assert [p.name for p in units[0].parameters] == [
        "transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight", "transformer.ln_f.bias"
    ]  # fmt: skip
    assert [(u.name, u.is_root) for u in parameter_units(resolve_model(SEED))] == [
        ("fc1", False), ("fc2", False), ("fc3", False), ("fc4", False)
    ]  # fmt: skip


def test_a_plan_whose_micro_batches_multiply_its_collectives_says_so_first_with_a_usual_micro_batch() -> None:
    """GPT-2 under FSDP2 on 8 GPUs at the preset's global batch of 1024 and micro-batch 1: 128 micro-batches per
    replica, each gathering and reduce-scattering the root and 12 layers (13 + 12 gathers and 13 reduce-scatters
    per micro-batch). At micro-batch 8 the same global batch is 16 micro-batches: 8 × fewer."""
    document = framework("gpt2", dp_impl="fsdp2")
    assert document.notes[0] == (
        "Micro-batches multiply this plan's collectives: 4,864 per step (3,200 all_gather, 1,664 reduce_scatter), "
        "because each of the 8 data-parallel replicas runs 128 micro-batches of 1 sample (global batch 1024 ÷ dp 8 "
        "÷ micro-batch 1): the global batch and the micro-batch set the count, not the strategy. At micro-batch 8 "
        "(16 micro-batches, --micro-batch 8) the step would issue 608 (400 all_gather, 208 reduce_scatter)."
    )
    usual = framework("gpt2", dp_impl="fsdp2", micro_batch=8)
    assert sum(c.count_per_step for c in usual.collectives) == 608
    # At micro-batch 8 already, the comparison is the replica's batch in one micro-batch.
    assert usual.notes[0].endswith("At micro-batch 128 (1 micro-batch, --micro-batch 128) the step would issue 38 "
                                   "(25 all_gather, 13 reduce_scatter).")  # fmt: skip
    # DDP reduces once per step whatever the micro-batches (no_sync): nothing to say.
    assert framework("gpt2").notes[0].startswith("trials = ")
