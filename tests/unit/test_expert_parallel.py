"""Expert parallelism on mixture-of-experts presets: the all-to-all sizes and counts, the EP and
expert-data-parallel groups, the KCCB trial of the all-to-alls, and every refusal."""

import pytest
import yaml

from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import ParallelDim, PlanningError, PlanRequest
from emuplan.workload.hf_config import inventory_from_hf_config
from emuplan.workload.inventory import ModelInventory, ParameterInfo
from emuplan.workload.kccb import export_kccb
from emuplan.workload.planner import plan_workload
from emuplan.workload.sources import resolve_model

MIXTRAL = "mixtral-8x7b"
# Mixtral-8x7B, micro-batch 1, seq_len 4096, top-2, hidden 4096, bf16: 1 × 4096 × 2 × 4096 × 2 bytes.
MIXTRAL_ALL_TO_ALL = 67_108_864
# One MoE layer's routed experts: 8 × (gate_up [2 × 14336, 4096] + down [4096, 14336]) parameters.
MIXTRAL_EXPERTS_PER_LAYER = 8 * 3 * 4096 * 14336


def plan(model: str = MIXTRAL, **options):
    return plan_workload(PlanRequest(model=model, mode="framework", **options), resolve_model(model))


def of(document, dim: ParallelDim) -> list:
    return [item for item in document.collectives if item.parallel_dim is dim]


def test_mixtral_ep8_alone_dispatches_and_combines_each_layer_and_micro_batch() -> None:
    document = plan(ep=8, tp=1, pp=1)
    assert (document.inputs.gpus, document.inputs.dp, document.inputs.ep) == (8, 8, 8)
    assert document.inputs.micro_batches == 128  # 1024 sequences / 8 replicas, micro-batch 1
    expert_parallel = [(c.op, c.bytes_total, c.bytes_per_rank, c.group_size, c.count_per_step, c.phase.value)
                       for c in of(document, ParallelDim.EP)]  # fmt: skip
    # Megatron-core's MoEAlltoAllTokenDispatcher (megatron/core/transformer/moe/token_dispatcher.py): per MoE
    # layer and micro-batch, preprocess() all-gathers the 8 experts' int64 token counts over the TP×EP group
    # (here EP alone), dispatch_all_to_all() sends the tokens and, since 0.12, their routing probabilities
    # (4096 × top-2 rows × 2 bytes); combine_all_to_all() sends the tokens back; backward mirrors the
    # all-to-alls. 2 × 32 MoE layers × 128 micro-batches token all-to-alls each way, 4,096 of each other.
    assert expert_parallel == [
        (CollectiveOp.ALL_TO_ALL, MIXTRAL_ALL_TO_ALL, MIXTRAL_ALL_TO_ALL, 8, 8192, "forward"),
        (CollectiveOp.ALL_GATHER, 8 * 8 * 8, 8 * 8, 8, 4096, "forward"),
        (CollectiveOp.ALL_TO_ALL, 16_384, 16_384, 8, 4096, "forward"),
        (CollectiveOp.ALL_TO_ALL, MIXTRAL_ALL_TO_ALL, MIXTRAL_ALL_TO_ALL, 8, 8192, "backward"),
        (CollectiveOp.ALL_TO_ALL, 16_384, 16_384, 8, 4096, "backward"),
    ]
    # Each EP rank holds one expert per layer; dp / ep = 1, so expert gradients are never all-reduced.
    assert of(document, ParallelDim.EDP) == []
    dense_gradients = sum(c.bytes_total for c in of(document, ParallelDim.DP) if c.op is CollectiveOp.ALL_REDUCE)
    assert dense_gradients == (46_702_792_704 - 32 * MIXTRAL_EXPERTS_PER_LAYER) * 2
    trial = document.kccb_list()[0]
    assert (trial.algorithm, trial.algorithm_id, trial.data_sizes, trial.iterations) == (
        "ALGO_ALL_TO_ALL_PARALLEL",
        1,
        [MIXTRAL_ALL_TO_ALL, 16_384],
        100,
    )
    assert (trial.hosts, trial.gpus_per_host, trial.parallel_dim, trial.group_size) == (1, 8, ParallelDim.EP, 8)


def test_megatron_core_before_0_12_sends_no_routing_probabilities() -> None:
    """Up to 0.11 the dispatcher applied the probabilities on the token's own rank; the counts were gathered."""
    document = plan(ep=8, megatron_core="0.11")
    assert [(c.op, c.bytes_total, c.count_per_step) for c in of(document, ParallelDim.EP)] == [
        (CollectiveOp.ALL_TO_ALL, MIXTRAL_ALL_TO_ALL, 8192),
        (CollectiveOp.ALL_GATHER, 512, 4096),
        (CollectiveOp.ALL_TO_ALL, MIXTRAL_ALL_TO_ALL, 8192),
    ]


def test_mixtral_hybrid_tp2_pp4_ep8_dp8() -> None:
    """Each TP rank dispatches its sequence-parallel half; the EP group is 8 replicas, 8 ranks apart."""
    document = plan(strategy="hybrid", tp=2, pp=4, ep=8, dp=8)
    assert (document.inputs.gpus, document.inputs.micro_batches, document.inputs.sequence_parallel) == (64, 128, True)
    all_to_alls = [(c.bytes_total, c.group_size, c.count_per_step, c.phase.value) for c in of(document, ParallelDim.EP)]
    # 2 × 8 MoE layers in the busiest stage × 128 micro-batches; 1 × 4096 / 2 × 2 × 4096 × 2 bytes; the
    # probabilities once per layer and micro-batch: 2048 × 2 rows × 2 bytes.
    assert all_to_alls == [
        (33_554_432, 8, 2048, "forward"),
        (8192, 8, 1024, "forward"),
        (33_554_432, 8, 2048, "backward"),
        (8192, 8, 1024, "backward"),
    ]
    # The token counts gather over the EP group's TP groups: 8 experts × 8 bytes from each of 2 × 8 ranks.
    counts = of(document, ParallelDim.TP_EP)
    assert [(c.op, c.bytes_total, c.bytes_per_rank, c.group_size, c.count_per_step) for c in counts] == [
        (CollectiveOp.ALL_GATHER, 1024, 64, 16, 1024)
    ]
    expert_gathers = [
        (c.op, c.bytes_total, c.count_per_step, c.phase.value)
        for c in of(document, ParallelDim.TP)
        if c.label.endswith("(per MoE layer)")
    ]
    # dispatch_postprocess() gathers the tokens and their probabilities over TP; backward reduce-scatters both.
    assert expert_gathers == [
        (CollectiveOp.ALL_GATHER, 16_384, 1024, "forward"),
        (CollectiveOp.ALL_GATHER, MIXTRAL_ALL_TO_ALL, 1024, "forward"),
        (CollectiveOp.REDUCE_SCATTER, MIXTRAL_ALL_TO_ALL, 1024, "forward"),
        (CollectiveOp.REDUCE_SCATTER, 16_384, 1024, "backward"),
        (CollectiveOp.ALL_GATHER, MIXTRAL_ALL_TO_ALL, 1024, "backward"),
        (CollectiveOp.REDUCE_SCATTER, MIXTRAL_ALL_TO_ALL, 1024, "backward"),
    ]
    # Attention alone keeps Megatron's sequence-parallel pair: 8 layers × 128 micro-batches.
    attention = next(c for c in document.collectives if c.label.startswith("sequence-parallel input of QKV"))
    assert (attention.bytes_total, attention.count_per_step) == (33_554_432, 1024)
    # Megatron all-reduces the sequence-parallel gradients across TP once per step: the stage's 8 layers' two
    # norms and router [8, 4096], and the final norm, from fp32 main_grad.
    norms = next(c for c in document.collectives if "layer-norm" in c.label)
    assert norms.bytes_total == (8 * (2 * 4096 + 8 * 4096) + 4096) * 4
    ep_trial = next(t for t in document.kccb_list() if t.parallel_dim is ParallelDim.EP)
    assert (ep_trial.data_sizes, ep_trial.hosts, ep_trial.gpus_per_host) == ([33_554_432, 8192], 8, 1)
    # Ranks 0, 1, 8, 9, …, 56, 57: two on each of 8 hosts.
    counts_trial = next(t for t in document.kccb_list() if t.parallel_dim is ParallelDim.TP_EP)
    assert (counts_trial.data_sizes, counts_trial.hosts, counts_trial.gpus_per_host) == ([64], 8, 2)
    assert any("carved from the 8 DP ranks" in note for note in document.notes)


def test_expert_gradients_reduce_over_the_expert_data_parallel_group() -> None:
    document = plan(ep=4, dp=8)
    expert = of(document, ParallelDim.EDP)
    assert {(c.op, c.group_size) for c in expert} == {(CollectiveOp.ALL_REDUCE, 2)}
    # Two of the eight experts of each of 32 layers per EP rank, bf16 gradients.
    assert sum(c.bytes_total for c in expert) == 32 * MIXTRAL_EXPERTS_PER_LAYER // 4 * 2
    assert {c.group_size for c in of(document, ParallelDim.DP)} == {8}
    edp_trial = next(t for t in document.kccb_list() if t.parallel_dim is ParallelDim.EDP)
    # Ranks 0 and 4 of an 8-GPU host hold the same experts.
    assert (edp_trial.hosts, edp_trial.gpus_per_host, edp_trial.group_size) == (1, 2, 2)


def test_capacity_factor_pads_every_expert_to_capacity() -> None:
    """ceil(1.25 × 4096 tokens × 2 / 8 experts) = 1280 tokens per expert; 8 × 1280 × 4096 × 2 bytes, and a
    probability per padded row. Padded to capacity (drop_and_pad), Megatron gathers no token counts."""
    document = plan(ep=8, capacity_factor=1.25)
    assert [(c.op, c.bytes_total) for c in of(document, ParallelDim.EP)] == [
        (CollectiveOp.ALL_TO_ALL, 83_886_080),
        (CollectiveOp.ALL_TO_ALL, 8 * 1280 * 2),
        (CollectiveOp.ALL_TO_ALL, 83_886_080),
        (CollectiveOp.ALL_TO_ALL, 8 * 1280 * 2),
    ]


def test_hot_expert_factor_sizes_the_all_to_all_for_the_busiest_rank() -> None:
    document = plan(ep=8, hot_expert_factor=2.0)
    all_to_alls = of(document, ParallelDim.EP)
    assert {c.bytes_total for c in all_to_alls if c.op is CollectiveOp.ALL_TO_ALL} == {2 * MIXTRAL_ALL_TO_ALL, 32_768}
    assert any(note.startswith("Load imbalance: the busiest EP rank receives hot_expert_factor 2") for note in
               document.notes)  # fmt: skip


def test_kccb_yaml_has_its_own_all_to_all_trial() -> None:
    trials = yaml.safe_load(export_kccb(plan(ep=8), "yaml"))["trials"]
    assert trials[0] == {
        "name": "mixtral-8x7b data all_to_all ep8",
        "benchmark": {
            "collective_algorithm": "ALGO_ALL_TO_ALL_PARALLEL",
            "datasize_list": {"size_bytes": [MIXTRAL_ALL_TO_ALL, 16_384]},
            "iterations": 100,
        },
        "infrastructure": {"host": {"count": 1, "generic": {"npu_count": 8}}, "rocev2": {"qps_per_rankpair": 1}},
        "note": "ep group of 8 ranks; data sizes are the whole buffer; 24576 all_to_all per training step in all "
        "(MoE token dispatch and combine, and the routing probabilities; each data size is one rank's whole send "
        "buffer, as nccl-tests)",
    }


def test_deepseek_v3_plans_58_moe_layers_with_shared_experts() -> None:
    """61 layers, the first 3 dense; top-8 of 256 experts, hidden 7168: 1 × 4096 × 8 × 7168 × 2 bytes."""
    document = plan("deepseek-v3", ep=8, dp=8)
    assert [(c.bytes_total, c.count_per_step) for c in of(document, ParallelDim.EP)] == [
        (469_762_048, 2 * 58 * 128),
        (256 * 8 * 8, 58 * 128),  # 256 experts' int64 token counts from each of 8 ranks
        (4096 * 8 * 2, 58 * 128),
        (469_762_048, 2 * 58 * 128),
        (4096 * 8 * 2, 58 * 128),
    ]


@pytest.mark.parametrize(
    ("model", "options", "message"),
    [
        ("llama-3-8b", {"ep": 2}, r"^ep: llama-3-8b has no experts the planner knows of"),
        (MIXTRAL, {"ep": 3, "gpus": 8}, r"^ep: expert-parallel groups are carved from the data-parallel ranks, "
                                        r"but ep 3 does not divide dp 8$"),
        (MIXTRAL, {"ep": 16}, r"^ep: the model's 8 experts per layer cannot be split evenly over 16 ranks$"),
        (MIXTRAL, {"ep": 0}, r"^ep: must be at least 1, got 0$"),
        (MIXTRAL, {"capacity_factor": 1.0}, r"^capacity_factor: only applies with expert parallelism \(ep > 1\)$"),
        (MIXTRAL, {"ep": 8, "capacity_factor": 0}, r"^capacity_factor: must be positive, got 0"),
        (MIXTRAL, {"ep": 8, "hot_expert_factor": 9}, r"^hot_expert_factor: must be between 1 \(even load\) and ep 8"),
        (MIXTRAL, {"ep": 8, "hot_expert_factor": 0.5}, r"^hot_expert_factor: must be between 1"),
        (MIXTRAL, {"ep": 8, "hot_expert_factor": 2, "capacity_factor": 1.0}, r"^hot_expert_factor: with capacity"),
    ],
)  # fmt: skip
def test_expert_options_that_cannot_be_planned_are_refused(model: str, options: dict, message: str) -> None:
    with pytest.raises(PlanningError, match=message):
        plan(model, **options)


# A small DeepSeek-V3: 3 layers of hidden 64 with MLA, the last 2 with 4 routed experts and a shared one.
SMALL_DEEPSEEK = {"model_type": "deepseek_v3", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3,
                  "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "max_position_embeddings": 32,
                  "q_lora_rank": 24, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
                  "v_head_dim": 12, "n_routed_experts": 4, "num_experts_per_tok": 2, "n_group": 2, "topk_group": 1,
                  "moe_intermediate_size": 32, "n_shared_experts": 1, "first_k_dense_replace": 1}  # fmt: skip


def small_deepseek_tp2():
    inventory = inventory_from_hf_config(SMALL_DEEPSEEK, name="small-deepseek")
    request = PlanRequest(model="small-deepseek", strategy="tensor", tp=2, gpus=2, batch_size=1)
    return plan_workload(request, inventory)


def test_sequence_parallel_reduces_routers_and_mla_down_projections_across_tp() -> None:
    """Megatron marks them sequence_parallel like the norms: each TP rank's gradient covers its part of
    the sequence."""
    norms = next(c for c in small_deepseek_tp2().collectives if "layer-norm" in c.label)
    # Per layer: 2 norms × 64, q_a_layernorm 24, kv_a_layernorm 16, q_a_proj 24 × 64, kv_a_proj (16 + 4) × 64;
    # 2 routers 4 × 64; the final norm 64. fp32 main_grad.
    assert norms.bytes_total == (3 * (2 * 64 + 24 + 16 + 24 * 64 + 20 * 64) + 2 * 4 * 64 + 64) * 4


def test_mla_under_sequence_parallel_gathers_its_latents() -> None:
    """32 tokens per micro-batch, bf16: the query latent 24 wide, the key/value latent 16, the rotary key 4;
    the shared expert's MLP and the row-parallel outputs carry the hidden state (64)."""
    document = small_deepseek_tp2()
    assert document.inputs.sequence_parallel
    rows = [(c.op.value, c.bytes_total, c.count_per_step, c.phase.value) for c in document.collectives
            if "MLA" in c.label or "up input" in c.label or "attention / MLP output" in c.label
            or "row-parallel output gradient" in c.label]  # fmt: skip
    assert rows == [
        ("all_gather", 32 * 24 * 2, 3, "forward"),
        ("all_gather", 32 * 16 * 2, 3, "forward"),
        ("all_gather", 32 * 4 * 2, 3, "forward"),
        ("all_gather", 32 * 64 * 2, 3, "forward"),
        ("reduce_scatter", 32 * 64 * 2, 6, "forward"),
        ("all_gather", 32 * 64 * 2, 6, "backward"),
        ("all_gather", 32 * 24 * 2, 3, "backward"),
        ("all_gather", 32 * 16 * 2, 3, "backward"),
        ("all_gather", 32 * 64 * 2, 3, "backward"),
        ("reduce_scatter", 32 * 24 * 2, 3, "backward"),
        ("reduce_scatter", 32 * 16 * 2, 3, "backward"),
        ("reduce_scatter", 32 * 4 * 2, 3, "backward"),
        ("reduce_scatter", 32 * 64 * 2, 3, "backward"),
    ]


def test_a_source_merely_naming_tensors_experts_is_planned_as_the_linear_layers_it_has() -> None:
    """Without a transformer shape the planner knows no routing: DTensor plans the 2-D weights only."""
    inventory = ModelInventory(
        name="named-experts",
        source_kind="safetensors",
        parameters=[
            ParameterInfo(name="layers.0.experts.gate_up_proj", shape=[4, 32, 16]),
            ParameterInfo(name="layers.0.proj.weight", shape=[16, 16]),
            ParameterInfo(name="layers.0.out.weight", shape=[16, 16]),
        ],
    )
    request = PlanRequest(model="named-experts", mode="framework", strategy="tensor", tp=2, gpus=2)
    document = plan_workload(request, inventory)
    assert [(c.op, c.label) for c in document.collectives] == [
        (CollectiveOp.ALL_REDUCE, "layers.0.out output (RowwiseParallel)")
    ]


def test_tutorial_mode_has_no_experts_to_offer() -> None:
    request = PlanRequest(model=MIXTRAL, mode="tutorial", ep=8)
    message = r"^ep: tutorial mode reproduces the seed notebooks, which have no mixture of experts; plan expert "
    with pytest.raises(PlanningError, match=message + r"parallelism in framework mode$"):
        plan_workload(request, resolve_model(MIXTRAL))


EXPERT_BIAS = "expert-bias token counts"


def test_deepseek_v3_all_reduces_its_expert_bias_token_counts_once_per_step() -> None:
    """DeepSeek-V3's aux-loss-free balancing under Megatron (--moe-router-enable-expert-bias): finalize_model_grads'
    _update_router_expert_bias stacks the stage's routers' float32 token counts (58 MoE layers of the 61 × 256
    experts) and get_updated_expert_bias all-reduces them over the TP×DP group, once per step."""
    document = plan("deepseek-v3", gpus=4, ep=4, seq_len=1024, batch_size=4)
    [bias] = [c for c in document.collectives if c.label.startswith(EXPERT_BIAS)]
    assert (bias.op, bias.bytes_total, bias.dtype, bias.group_size, bias.parallel_dim, bias.count_per_step) == (
        CollectiveOp.ALL_REDUCE, 58 * 256 * 4, "float32", 4, ParallelDim.DP, 1,
    )  # fmt: skip
    # With TP the group is every TP rank of every replica: Megatron's tensor_and_data_parallel_group, 2 × 4 ranks,
    # runs of 2 consecutive ranks: one KCCB trial on one host.
    with_tp = plan("deepseek-v3", strategy="hybrid", tp=2, dp=4, ep=2, seq_len=1024, batch_size=4)
    [bias] = [c for c in with_tp.collectives if c.label.startswith(EXPERT_BIAS)]
    assert (bias.group_size, bias.parallel_dim) == (8, ParallelDim.TP_DP)
    [trial] = [t for t in with_tp.kccb_list() if t.parallel_dim is ParallelDim.TP_DP]
    assert (trial.data_sizes, trial.group_size, trial.hosts, trial.gpus_per_host) == ([58 * 256 * 4], 8, 1, 8)
    # Each pipeline stage reduces its own layers' counts: layers 3-30 on stage 0, 31-60 on stage 1.
    staged = plan("deepseek-v3", strategy="hybrid", pp=2, dp=2, seq_len=1024, batch_size=4)
    assert [
        [c.bytes_total for c in stage.collectives if c.label.startswith(EXPERT_BIAS)] for stage in staged.stages
    ] == [[28 * 256 * 4], [30 * 256 * 4]]
    # Mixtral balances with an auxiliary loss: no bias, no such all-reduce.
    assert not [c for c in plan(ep=8).collectives if c.label.startswith(EXPERT_BIAS)]
