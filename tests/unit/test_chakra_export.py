"""Chakra execution traces of a plan's training step: read back with the generated schema module."""

import json
import subprocess
import sys
from collections import Counter
from graphlib import TopologicalSorter
from pathlib import Path

import pytest

from emuplan.workload.chakra import et_def_pb2 as et
from emuplan.workload.chakra.bundle import attribute, bundle_files, decode_trace, split_delimited
from emuplan.workload.chakra.schedule import (
    ComputeModel,
    ExportError,
    RankRole,
    build_traces,
    one_f_one_b,
    parse_ranks,
)
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import PlanRequest
from emuplan.workload.planner import plan_workload
from emuplan.workload.sources import resolve_model

CHAKRA_DIR = Path(__file__).parents[2] / "backend" / "emuplan" / "workload" / "chakra"
COMM_TYPES = {
    CollectiveOp.ALL_REDUCE: et.ALL_REDUCE,
    CollectiveOp.ALL_GATHER: et.ALL_GATHER,
    CollectiveOp.REDUCE_SCATTER: et.REDUCE_SCATTER,
    CollectiveOp.ALL_TO_ALL: et.ALL_TO_ALL,
    CollectiveOp.BROADCAST: et.BROADCAST,
}


def export(model: str, **request) -> tuple[object, dict[str, bytes]]:
    inventory = resolve_model(model)
    document = plan_workload(PlanRequest(model=model, **request), inventory)
    traces = build_traces(document, inventory, ComputeModel.from_options())
    return document, bundle_files(document, traces, "a test plan")


def decoded(files: dict[str, bytes]) -> dict[int, list]:
    """rank → its nodes, after checking each file starts with the schema's GlobalMetadata."""
    ranks = {}
    for name, content in files.items():
        if name.endswith(".et"):
            metadata, nodes = decode_trace(content)
            assert metadata.version == "0.0.4"
            ranks[int(name.split(".")[1])] = nodes
    return ranks


def collectives(nodes) -> list:
    return [node for node in nodes if node.type == et.COMM_COLL_NODE]


def by_name(nodes, name: str):
    [node] = [node for node in nodes if node.name == name]
    return node


def assert_well_formed(nodes) -> None:
    """Unique ids, every dependency a node of the same rank, no cycle, no CPU op."""
    ids = [node.id for node in nodes]
    assert len(ids) == len(set(ids))
    graph = {node.id: set(node.data_deps) | set(node.ctrl_deps) for node in nodes}
    assert all(parents <= graph.keys() for parents in graph.values())
    assert len(list(TopologicalSorter(graph).static_order())) == len(nodes)
    assert all(attribute(node, "is_cpu_op") is False for node in nodes)


def test_committed_schema_module_is_what_protoc_makes_of_the_proto(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{CHAKRA_DIR}", f"--python_out={tmp_path}", "et_def.proto"],
        check=True,
    )
    assert (tmp_path / "et_def_pb2.py").read_bytes() == (CHAKRA_DIR / "et_def_pb2.py").read_bytes()


def test_seed_mlp_data_parallel_one_all_reduce_after_fc1_backward() -> None:
    document, files = export("fashion-mnist-mlp", mode="framework", gpus=4)
    assert json.loads(files["comm_groups.json"]) == {"1": [0, 1, 2, 3]}
    assert json.loads(files["comm_group_names.json"]) == {"1": "dp stage0 tp0"}
    ranks = decoded(files)
    assert sorted(ranks) == [0, 1, 2, 3]
    for nodes in ranks.values():
        assert_well_formed(nodes)
        [all_reduce] = collectives(nodes)
        assert attribute(all_reduce, "comm_type") == et.ALL_REDUCE
        assert attribute(all_reduce, "comm_size") == 971048
        assert attribute(all_reduce, "pg_name") == "1"
        assert list(all_reduce.data_deps) == [by_name(nodes, "mb0 bwd weight-grad fc1").id]
        # Forward fc1..fc4, backward input- and weight-gradient fc4..fc1, then the optimizer after the all-reduce.
        compute = [node.name for node in nodes if node.type == et.COMP_NODE]
        assert compute == [
            *(f"mb0 fwd fc{i}" for i in (1, 2, 3, 4)),
            *(f"mb0 bwd {kind} fc{i}" for i in (4, 3, 2, 1) for kind in ("input-grad", "weight-grad")),
            "optimizer step",
        ]
        assert list(by_name(nodes, "optimizer step").data_deps) == [all_reduce.id]
        # fc1 forward: 2 × 2048 samples × 200704 weights = 822083584 FLOPs at 40 % of 989 TFLOP/s → 2 µs.
        fc1 = by_name(nodes, "mb0 fwd fc1")
        assert (attribute(fc1, "num_ops"), fc1.duration_micros) == (822083584, 2)
    assert document.collectives[0].bytes_total == 971048


def gpt2_hybrid():
    return export("gpt2", strategy="hybrid", tp=2, pp=2, dp=2, batch_size=8, seq_len=1024, grad_dtype="bfloat16")


def test_gpt2_hybrid_groups_follow_the_rank_layout() -> None:
    _, files = gpt2_hybrid()
    assert json.loads(files["comm_groups.json"]) == {
        "1": [0, 1], "2": [2, 3], "3": [4, 5], "4": [6, 7],  # TP: innermost
        "5": [0, 4], "6": [1, 5], "7": [2, 6], "8": [3, 7],  # DP: same stage and TP index
        "9": [0, 2], "10": [1, 3], "11": [4, 6], "12": [5, 7],  # tied embedding: first and last stage
    }  # fmt: skip


def test_gpt2_hybrid_every_planned_collective_with_its_size_and_count() -> None:
    document, files = gpt2_hybrid()
    ranks = decoded(files)
    assert sorted(ranks) == list(range(8))
    for nodes in ranks.values():
        assert_well_formed(nodes)
    # Stage 0's collectives (ranks 0, 1, 4, 5); point-to-point is checked below.
    expected = Counter()
    for item in document.stages[0].collectives:
        if item.op is not CollectiveOp.SEND_RECV:
            expected[(COMM_TYPES[item.op], item.bytes_per_rank)] += item.count_per_step
    assert sum(expected.values()) == 4 + 48 + 48 + 1 + 3
    for rank in (0, 1, 4, 5):
        found = Counter((attribute(n, "comm_type"), attribute(n, "comm_size")) for n in collectives(ranks[rank]))
        assert found == expected
    first_bucket = by_name(ranks[0], "DDP bucket 0 all-reduce")
    assert attribute(first_bucket, "comm_size") == 2360832
    assert list(first_bucket.data_deps) == [by_name(ranks[0], "mb3 bwd weight-grad transformer.h.5 mlp").id]
    # Later backward compute does not wait for the bucket: it overlaps.
    later = by_name(ranks[0], "mb3 bwd input-grad transformer.h.4 mlp")
    assert later.id > first_bucket.id and first_bucket.id not in [*later.data_deps, *later.ctrl_deps]


def test_gpt2_hybrid_sends_meet_their_receives_and_follow_1f1b() -> None:
    document, files = gpt2_hybrid()
    ranks = decoded(files)
    sends, recvs = Counter(), Counter()
    for rank, nodes in ranks.items():
        for node in (n for n in nodes if n.type in (et.COMM_SEND_NODE, et.COMM_RECV_NODE)):
            key = (attribute(node, "comm_src"), attribute(node, "comm_dst"), attribute(node, "comm_tag"))
            if node.type == et.COMM_SEND_NODE:
                assert key[0] == rank
                sends[(*key, attribute(node, "comm_size"))] += 1
            else:
                assert key[1] == rank
                recvs[(*key, attribute(node, "comm_size"))] += 1
    assert sends == recvs
    assert set(sends.values()) == {1}  # every tag used once
    planned = sum(item.count_per_step for item in document.collectives if item.op is CollectiveOp.SEND_RECV)
    assert len(sends) == planned * 4  # one pipeline per (dp, tp) pair
    assert {size for (*_, size) in sends} == {1572864}  # 1 × 1024 tokens × 768 × 2 bytes
    # TP all-reduce between the attention and MLP matmuls it joins.
    nodes = ranks[0]
    attention, mlp = by_name(nodes, "mb0 fwd transformer.h.0 attention"), by_name(nodes, "mb0 fwd transformer.h.0 mlp")
    [joining] = [n for n in collectives(nodes) if attention.id in n.data_deps]
    assert joining.id in mlp.data_deps and attribute(joining, "pg_name") == "1"
    # Stage 0 warms up with one extra forward; stage 1 alternates from the start: the bubble.
    assert one_f_one_b(0, 2, 4) == [
        ("forward", 0), ("forward", 1), ("backward", 0), ("forward", 2),
        ("backward", 1), ("forward", 3), ("backward", 2), ("backward", 3),
    ]  # fmt: skip
    stage1_order = [n.name.split(" ")[:2] for n in ranks[2] if n.type == et.COMP_NODE and n.name.endswith("attention")]
    assert [step for i, step in enumerate(stage1_order) if i == 0 or step != stage1_order[i - 1]] == [
        ["mb0", "fwd"], ["mb0", "bwd"], ["mb1", "fwd"], ["mb1", "bwd"],
        ["mb2", "fwd"], ["mb2", "bwd"], ["mb3", "fwd"], ["mb3", "bwd"],
    ]  # fmt: skip
    stage0_first_recv = next(n for n in nodes if n.type == et.COMM_RECV_NODE)
    assert attribute(stage0_first_recv, "comm_src") == 2


def test_every_rank_is_written_up_to_16384_then_one_per_stage_unless_ranks_are_asked_for() -> None:
    inventory = resolve_model("gpt2")
    document = plan_workload(PlanRequest(model="gpt2", strategy="hybrid", tp=2, pp=2, gpus=128), inventory)
    traces = build_traces(document, inventory, ComputeModel.from_options())
    assert traces.ranks == list(range(128)) and sorted(traces.stage_nodes) == [0, 1]
    huge = PlanRequest(model="gpt2", strategy="hybrid", tp=2, pp=2, gpus=32768, batch_size=8192)
    huge = plan_workload(huge, inventory)
    per_stage = build_traces(huge, inventory, ComputeModel.from_options())
    assert per_stage.ranks == [0, 2]
    files = bundle_files(huge, per_stage, "a test plan")
    assert "one rank per pipeline stage (2 files: ranks 0, 2)" in files["README.txt"].decode()
    chosen = build_traces(document, inventory, ComputeModel.from_options(), parse_ranks("0-3,127", 128))
    assert chosen.ranks == [0, 1, 2, 3, 127]
    assert chosen.role(127) == RankRole(127, dp_index=31, stage=1, tp_index=1)
    assert (
        "Only the requested ranks were written: 0-3, 127 of 128."
        in bundle_files(document, chosen, "a test plan")["README.txt"].decode()
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0-8", "ranks: rank 8 is outside 0-7 (the plan has 8 GPUs)"),
        ("3-1", "ranks: range 3-1 runs backwards"),
        ("a", "ranks: 'a' is not a rank or a range like 0-7"),
        ("0-20000", "ranks: more than 16384 ranks in one bundle; ask for fewer"),
    ],
)
def test_bad_ranks_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ExportError, match="^" + message.replace("(", r"\(").replace(")", r"\)") + "$"):
        parse_ranks(text, 8 if text != "0-20000" else 32768)


def test_a_mixture_of_experts_computes_top_k_experts_per_token() -> None:
    """Mixtral, data parallel: each of 4096 tokens runs its router [8, 4096] and 2 of the 8 experts
    (gate_up [28672, 4096] + down [4096, 14336] each), 2 FLOPs per weight element."""
    _, files = export("mixtral-8x7b", mode="framework", gpus=2, batch_size=2)
    nodes = decoded(files)[0]
    mlp = by_name(nodes, "mb0 fwd model.layers.0 mlp")
    assert attribute(mlp, "num_ops") == 2 * 4096 * (8 * 4096 + 2 * 3 * 4096 * 14336)


def mixtral_expert_parallel():
    return export("mixtral-8x7b", mode="framework", ep=2, dp=4, batch_size=4)


def test_expert_parallel_groups_are_consecutive_replicas_and_every_ep_th_one() -> None:
    _, files = mixtral_expert_parallel()
    assert json.loads(files["comm_groups.json"]) == {
        "1": [0, 1, 2, 3],
        "2": [0, 1],
        "3": [2, 3],
        "4": [0, 2],
        "5": [1, 3],
    }
    assert json.loads(files["comm_group_names.json"]) == {
        "1": "dp stage0 tp0", "2": "ep dp0-1 stage0 tp0", "3": "ep dp2-3 stage0 tp0",
        "4": "edp ep-rank0 stage0 tp0", "5": "edp ep-rank1 stage0 tp0",
    }  # fmt: skip


def test_expert_parallel_every_planned_collective_with_its_size_count_and_group() -> None:
    """All-to-alls in the EP group around each MoE layer's experts, expert buckets over the
    expert-data-parallel group, the rest (and DDP's buffer broadcast) over all dp ranks."""
    document, files = mixtral_expert_parallel()
    ranks = decoded(files)
    expected = Counter()
    for item in document.collectives:
        expected[(COMM_TYPES[item.op], item.bytes_per_rank)] += item.count_per_step
    groups = {"ep": 2, "edp": 4, "dp": 1}
    expected_groups = Counter()
    for item in document.collectives:
        expected_groups[groups[item.parallel_dim.value]] += item.count_per_step
    for nodes in ranks.values():
        assert_well_formed(nodes)
    nodes = ranks[0]
    assert Counter((attribute(n, "comm_type"), attribute(n, "comm_size")) for n in collectives(nodes)) == expected
    assert Counter(int(attribute(n, "pg_name")) for n in collectives(nodes)) == expected_groups
    # 2 forward + 2 backward all-to-alls of 1 × 4096 × 2 × 4096 × 2 bytes per layer.
    assert expected[(et.ALL_TO_ALL, 67_108_864)] == 4 * 32
    counts = by_name(
        nodes, "mb0 fwd model.layers.0 mlp: MoE tokens per expert, to size the all-to-alls (per MoE layer)"
    )
    dispatch = by_name(nodes, "mb0 fwd model.layers.0 mlp: MoE token dispatch")
    probabilities = by_name(nodes, "mb0 fwd model.layers.0 mlp: MoE routing probabilities (per MoE layer)")
    experts = by_name(nodes, "mb0 fwd model.layers.0 mlp")
    combine = by_name(nodes, "mb0 fwd model.layers.0 mlp: MoE token combine")
    # Megatron's dispatcher: the counts size the tokens' all-to-all, the probabilities follow the tokens.
    assert counts.id in dispatch.data_deps and dispatch.id in probabilities.data_deps
    assert probabilities.id in experts.data_deps and experts.id in combine.data_deps
    # Each rank computes top-2 of 8 experts for its tokens, whichever 4 experts it holds.
    assert attribute(experts, "num_ops") == 2 * 4096 * (8 * 4096 + 2 * 3 * 4096 * 14336)


def test_plans_the_export_cannot_schedule_are_refused_with_the_field() -> None:
    inventory = resolve_model("fashion-mnist-mlp")
    compute = ComputeModel.from_options()
    tutorial = plan_workload(PlanRequest(model="fashion-mnist-mlp"), inventory)
    with pytest.raises(ExportError, match="^mode: "):
        build_traces(tutorial, inventory, compute)
    with pytest.raises(ExportError, match="^gpu: unknown GPU 'v100'"):
        ComputeModel.from_options("v100")
    with pytest.raises(ExportError, match=r"^utilisation: must be in \(0, 1\], got 1.5$"):
        ComputeModel.from_options(utilisation=1.5)


def test_gpu_and_utilisation_set_compute_time_and_are_stated() -> None:
    inventory = resolve_model("fashion-mnist-mlp")
    document = plan_workload(PlanRequest(model="fashion-mnist-mlp", mode="framework", gpus=4), inventory)
    traces = build_traces(document, inventory, ComputeModel.from_options("a100", 0.5))
    files = bundle_files(document, traces, "a test plan")
    metadata, nodes = decode_trace(files["workload.0.et"])
    # 822083584 FLOPs at 50 % of 312 TFLOP/s = 5.27 µs.
    assert by_name(nodes, "mb0 fwd fc1").duration_micros == 5
    assert {a.name: getattr(a, a.WhichOneof("value")) for a in metadata.attr}["utilisation"] == 0.5
    assert "NVIDIA A100 SXM dense bf16 peak 312 TFLOP/s x utilisation 0.5" in files["README.txt"].decode()


def test_a_truncated_stream_is_reported_where_it_breaks() -> None:
    _, files = export("fashion-mnist-mlp", mode="framework", gpus=2)
    data = files["workload.0.et"]
    assert len(list(split_delimited(data))) == 1 + 14
    with pytest.raises(ValueError, match="runs .* bytes past the end"):
        list(split_delimited(data[:-3]))


def test_each_rank_of_a_stage_runs_its_nodes_with_its_own_groups_and_peers() -> None:
    """Ranks 2 (dp 0, stage 1, tp 0) and 7 (dp 1, stage 1, tp 1) share their stage's nodes; rank 7's
    collectives run in its TP group 4 ([6, 7]), DP group 8 ([3, 7]) and tied-embedding group 12 ([5, 7]),
    and its pipeline peer is rank 5."""
    _, files = gpt2_hybrid()
    ranks = decoded(files)
    assert [(n.id, n.name, list(n.data_deps)) for n in ranks[7]] == [
        (n.id, n.name, list(n.data_deps)) for n in ranks[2]
    ]
    assert {attribute(n, "pg_name") for n in collectives(ranks[2])} == {"2", "7", "9"}
    assert {attribute(n, "pg_name") for n in collectives(ranks[7])} == {"4", "8", "12"}
    first_recv = next(n for n in ranks[7] if n.type == et.COMM_RECV_NODE)
    assert (attribute(first_recv, "comm_src"), attribute(first_recv, "comm_dst")) == (5, 7)


def test_megatron_finalize_waits_for_the_data_parallel_sync_then_layer_norms_then_tied_embedding() -> None:
    """finalize_model_grads: finish_grad_sync (the DDP buckets), then the sequence-parallel layer norms' TP
    all-reduce, then the tied word embedding's over the first and last stage, each after the one before.
    Stage 0's layer norms: 6 layers × (ln_1, ln_2 weight and bias + the two row-parallel biases) × 768
    = 27,648 main_grad elements in fp32. The data-parallel gradients pinned to bf16 (three buckets; Megatron's
    default reduces them in fp32, five buckets), so the layer norms alone show the fp32 main_grad."""
    _, files = export(
        "gpt2",
        strategy="hybrid",
        tp=2,
        pp=2,
        dp=2,
        batch_size=8,
        seq_len=1024,
        sequence_parallel=True,
        grad_dtype="bfloat16",
    )
    nodes = decoded(files)[0]
    buckets = [node.id for node in collectives(nodes) if node.name.startswith("DDP bucket")]
    assert len(buckets) == 3
    layer_norms = by_name(nodes, "sequence-parallel layer-norm all-reduce")
    last_compute = by_name(nodes, "mb3 bwd weight-grad embeddings")
    assert sorted(layer_norms.data_deps) == [*buckets[:2], last_compute.id, buckets[2]]
    assert (attribute(layer_norms, "comm_size"), attribute(layer_norms, "pg_name")) == (110592, "1")
    tied = by_name(nodes, "tied word-embedding all-reduce")
    assert (list(tied.data_deps), attribute(tied, "pg_name")) == ([layer_norms.id], "9")
    assert set(by_name(nodes, "optimizer step").data_deps) >= {*buckets, layer_norms.id, tied.id}


def test_sequence_parallel_weight_gradient_gather_overlaps_the_input_gradient() -> None:
    """Megatron's column-parallel backward under sequence parallel: the input's all-gather for the weight
    gradient (comm_size one rank's piece: 1 × 1024 tokens × 768 × 2 bytes / 4 = 393,216) runs beside the
    input gradient's matmul and only the weight gradient waits for it; the input gradient's reduce-scatter
    (the whole 1,572,864 bytes) follows the matmul and, on the TP communicator, the all-gather."""
    _, files = export("gpt2", strategy="tensor", gpus=4, batch_size=4, seq_len=1024, sequence_parallel=True)
    nodes = decoded(files)[0]
    for block, gather_label, scatter_label in (
        ("transformer.h.11 attention", "column-parallel input re-gathered for weight gradient (per layer ×2)",
         "column-parallel input gradient (per layer ×2)"),
        ("final norm and LM head", "LM head input re-gathered for weight gradient", "LM head input gradient"),
    ):  # fmt: skip
        gather = by_name(nodes, f"mb0 bwd {block}: {gather_label}")
        input_grad = by_name(nodes, f"mb0 bwd input-grad {block}")
        scatter = by_name(nodes, f"mb0 bwd {block}: {scatter_label}")
        weight_grad = by_name(nodes, f"mb0 bwd weight-grad {block}")
        assert gather.id not in [*input_grad.data_deps, *input_grad.ctrl_deps]
        assert (list(scatter.data_deps), list(scatter.ctrl_deps)) == ([input_grad.id], [gather.id])
        assert (list(weight_grad.data_deps), list(weight_grad.ctrl_deps)) == ([gather.id], [input_grad.id])
        assert (attribute(gather, "comm_size"), attribute(scatter, "comm_size")) == (393216, 1572864)


@pytest.mark.parametrize(("link_gbps", "latency_us", "micros"), [(50, 5, 5), (0.001, 20, 4116)])
def test_ddp_buffer_broadcast_lasts_the_plans_alpha_beta_time(link_gbps: float, latency_us: float, micros: int) -> None:
    """ASTRA-sim replays a broadcast for its duration: DDP's broadcast of Llama-3-8B's rotary buffers (inv_freq
    and original_inv_freq, 64 × float32 each: 512 B) lasts α + S/B at the plan's link figures, e.g. 20 µs +
    512 B ÷ 125,000 B/s = 4,116 µs, before the first forward."""
    document, files = export(
        "llama-3-8b", gpus=4, seq_len=1024, batch_size=4, link_gbps=link_gbps, latency_us=latency_us
    )
    [planned] = [item for item in document.collectives if item.op is CollectiveOp.BROADCAST]
    nodes = decoded(files)[0]
    broadcast = nodes[0]
    assert (broadcast.name, attribute(broadcast, "comm_type")) == (f"mb0 fwd: DDP: {planned.label}", et.BROADCAST)
    assert (attribute(broadcast, "comm_size"), broadcast.duration_micros) == (512, micros)
    assert list(by_name(nodes, "mb0 fwd embeddings").data_deps) == [broadcast.id]
