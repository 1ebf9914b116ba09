"""One training step of every rank as a dependency graph of compute and communication nodes.

The graph follows the plan's framework mode: rank = dp_index·(pp·tp) + stage·tp + tp_index; per
micro-batch each stage runs its blocks forward and backward in the 1F1B order, TP collectives sit
between the matmuls they join, pipeline activations and their gradients travel as send/receive
pairs, and DDP's bucket all-reduces start once the backward of their last gradient is done while
later backward compute goes on. Sizes come from the same strategy functions the planner uses.

Dependencies mean what ASTRA-sim reads them to mean: a node starts when all its parents are done.
Compute nodes form one chain per rank (the GPU's compute stream, ``ctrl_deps``); a node that needs
another's result lists it in ``data_deps``. A collective nobody waits for overlaps the compute after it.
"""

import re
import typing
from dataclasses import dataclass, field
from enum import StrEnum
from math import prod

from emuplan.workload.chakra.gpus import DEFAULT_GPU, DEFAULT_UTILISATION, GPUS, Gpu
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import NormalisedInputs, ParallelDim, Phase, PlanDocument, PlannedCollective
from emuplan.workload.inventory import ModelInventory, ParameterInfo, TransformerShape
from emuplan.workload.plan_options import DataParallelImpl, Mode
from emuplan.workload.planner import boundary_bytes, framework_stages, local_units, tied_embedding_bytes
from emuplan.workload.strategies.common import numel_bytes
from emuplan.workload.strategies.data_parallel import ddp_buckets
from emuplan.workload.strategies.expert_parallel import (
    is_expert_parameter,
    routing_metadata,
    split_expert_units,
    token_all_to_alls,
)
from emuplan.workload.strategies.pipeline_parallel import Stage
from emuplan.workload.strategies.tensor_parallel import (
    dtensor_linear_collectives,
    linear_layers,
    megatron_collectives,
)

# Above this many ranks a bundle holds one rank per pipeline stage unless ranks are asked for.
MAX_ALL_RANKS = 64
# A bundle's size grows with its ranks; past this, a request is more likely a typo than a need.
MAX_RANKS_PER_BUNDLE = 1024
# AdamW's update: two moment updates, bias corrections, square root, division, weight decay.
OPTIMIZER_FLOPS_PER_PARAMETER = 12
_EMBEDDING_NAMES = ("wte", "wpe", "embed_tokens", "embed_positions")


class ExportError(ValueError):
    """A plan or option the trace export cannot serve; the message names the field."""


@dataclass(frozen=True)
class ComputeModel:
    """Compute time = FLOPs ÷ (GPU peak × utilisation)."""

    gpu: Gpu
    utilisation: float

    @classmethod
    def from_options(cls, gpu: str = DEFAULT_GPU, utilisation: float = DEFAULT_UTILISATION) -> "ComputeModel":
        if gpu not in GPUS:
            raise ExportError(f"gpu: unknown GPU {gpu!r}; known: {', '.join(GPUS)}")
        if not 0 < utilisation <= 1:
            raise ExportError(f"utilisation: must be in (0, 1], got {utilisation}")
        return cls(GPUS[gpu], utilisation)

    def micros(self, flops: int) -> int:
        """Whole microseconds (Chakra's unit), at least 1 so every compute node takes time."""
        return max(1, round(flops / (self.gpu.peak_tflops * 1e12 * self.utilisation) * 1e6))


class NodeKind(StrEnum):
    COMPUTE = "compute"
    COLLECTIVE = "collective"
    SEND = "send"
    RECV = "recv"


@dataclass
class TraceNode:
    id: int
    name: str
    kind: NodeKind
    data_deps: list[int]
    ctrl_deps: list[int]
    flops: int = 0
    duration_micros: int = 0
    op: CollectiveOp | None = None
    comm_size: int = 0  # bytes one rank contributes: the plan's bytes_per_rank
    bytes_total: int = 0  # nccl-tests' whole buffer, as in the plan
    group_id: int | None = None
    src: int | None = None
    dst: int | None = None
    tag: int | None = None


@dataclass(frozen=True)
class RankRole:
    rank: int
    dp_index: int
    stage: int
    tp_index: int


@dataclass
class RankTrace:
    role: RankRole
    nodes: list[TraceNode]


@dataclass
class CommGroups:
    """Communicator groups by id (ASTRA-sim reads integer ids); ``names`` says what each one is."""

    ranks: dict[int, list[int]] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    _ids: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, ranks: list[int]) -> None:
        group_id = len(self.ranks) + 1  # ASTRA-sim keeps id 0 for "all ranks"
        self.ranks[group_id], self.names[group_id], self._ids[name] = ranks, name, group_id

    def id_of(self, name: str) -> int:
        return self._ids[name]


@dataclass
class TraceSet:
    traces: list[RankTrace]
    groups: CommGroups
    compute: ComputeModel
    world_size: int
    notes: list[str]


@dataclass
class _Block:
    """A stretch of one stage's forward between two TP synchronisations (a layer, or half of one)."""

    name: str
    parameters: list[ParameterInfo]  # the local (TP-sharded) parameters whose gradients it produces
    matmul_flops: int  # forward FLOPs with weights, per micro-batch on one rank
    other_flops: int = 0  # forward FLOPs without weights (attention scores)
    forward_before: list[PlannedCollective] = field(default_factory=list)
    forward_after: list[PlannedCollective] = field(default_factory=list)
    backward_before: list[PlannedCollective] = field(default_factory=list)
    backward_after: list[PlannedCollective] = field(default_factory=list)


@dataclass(frozen=True)
class _Reduction:
    """A DDP bucket's all-reduce: launched once the backward of block ``ready_after`` (backward order) ends."""

    name: str
    item: PlannedCollective
    group: int
    ready_after: int


def rank_of(inputs: NormalisedInputs, dp_index: int, stage: int, tp_index: int) -> int:
    return dp_index * inputs.pp * inputs.tp + stage * inputs.tp + tp_index


def role_of(inputs: NormalisedInputs, rank: int) -> RankRole:
    dp_index, rest = divmod(rank, inputs.pp * inputs.tp)
    stage, tp_index = divmod(rest, inputs.tp)
    return RankRole(rank, dp_index, stage, tp_index)


def parse_ranks(text: str, world_size: int) -> list[int]:
    """'0-7', '0,4,8-11' → sorted ranks; each must lie in 0 … world_size − 1."""
    ranks: set[int] = set()
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if match is None:
            raise ExportError(f"ranks: {part.strip()!r} is not a rank or a range like 0-7")
        first, last = int(match.group(1)), int(match.group(2) or match.group(1))
        if first > last:
            raise ExportError(f"ranks: range {first}-{last} runs backwards")
        if last >= world_size:
            raise ExportError(f"ranks: rank {last} is outside 0-{world_size - 1} (the plan has {world_size} GPUs)")
        ranks.update(range(first, last + 1))
        if len(ranks) > MAX_RANKS_PER_BUNDLE:
            raise ExportError(f"ranks: more than {MAX_RANKS_PER_BUNDLE} ranks in one bundle; ask for fewer")
    return sorted(ranks)


def _layout_groups(inputs: NormalisedInputs, tied_embedding: bool) -> CommGroups:
    """Every group of the layout, in a fixed order, so ids do not depend on which ranks are written."""
    groups = CommGroups()
    for d in range(inputs.dp):
        for s in range(inputs.pp):
            if inputs.tp > 1:
                groups.add(f"tp dp{d} stage{s}", [rank_of(inputs, d, s, t) for t in range(inputs.tp)])
    for s in range(inputs.pp):
        for t in range(inputs.tp):
            if inputs.dp > 1:
                groups.add(f"dp stage{s} tp{t}", [rank_of(inputs, d, s, t) for d in range(inputs.dp)])
    if inputs.ep > 1:
        for s in range(inputs.pp):
            for t in range(inputs.tp):
                for first in range(0, inputs.dp, inputs.ep):
                    replicas = range(first, first + inputs.ep)
                    groups.add(_ep_group(first, s, t, inputs.ep), [rank_of(inputs, d, s, t) for d in replicas])
        for s in range(inputs.pp):
            for t in range(inputs.tp):
                for offset in range(inputs.ep if inputs.dp > inputs.ep else 0):
                    replicas = range(offset, inputs.dp, inputs.ep)
                    groups.add(_edp_group(offset, s, t), [rank_of(inputs, d, s, t) for d in replicas])
    if tied_embedding:
        for d in range(inputs.dp):
            for t in range(inputs.tp):
                ranks = [rank_of(inputs, d, 0, t), rank_of(inputs, d, inputs.pp - 1, t)]
                groups.add(f"embedding dp{d} tp{t}", ranks)
    return groups


def _ep_group(dp_index: int, stage: int, tp_index: int, ep: int) -> str:
    """The EP group of a replica: ``ep`` consecutive data-parallel indices."""
    first = dp_index - dp_index % ep
    return f"ep dp{first}-{first + ep - 1} stage{stage} tp{tp_index}"


def _edp_group(dp_index_in_ep: int, stage: int, tp_index: int) -> str:
    """The expert-data-parallel group: the replicas at the same place of every EP group."""
    return f"edp ep-rank{dp_index_in_ep} stage{stage} tp{tp_index}"


def _matmul_flops(parameters: list[ParameterInfo], samples: int, positions: dict[str, int]) -> int:
    """2 FLOPs per weight element and sample (per output position for convolutions); embeddings look up."""
    flops = 0
    for param in parameters:
        if len(param.shape) < 2 or any(name in param.name for name in _EMBEDDING_NAMES):
            continue
        module = param.name.rpartition(".")[0]
        flops += 2 * samples * param.numel * (positions.get(module, 1) if len(param.shape) > 2 else 1)
    return flops


def _gathers_first(items: list[PlannedCollective]) -> tuple[list[PlannedCollective], list[PlannedCollective]]:
    """An all-gather feeds the matmul after it; all-reduces and reduce-scatters join the one before."""
    before = [item for item in items if item.op is CollectiveOp.ALL_GATHER]
    return before, [item for item in items if item.op is not CollectiveOp.ALL_GATHER]


def _per_block(items: list[PlannedCollective], phase: Phase, share: int) -> list[PlannedCollective]:
    return [
        item.model_copy(update={"count_per_step": item.count_per_step // share})
        for item in items
        if item.phase is phase
    ]


def _megatron_blocks(stage: Stage, local: list, inputs: NormalisedInputs, inventory: ModelInventory, last: bool):
    shape = inventory.transformer
    tokens = inputs.micro_batch * inputs.seq_len
    kwargs = dict(
        hidden=shape.hidden_size,
        vocab=shape.vocab_size,
        tokens=tokens,
        tp=inputs.tp,
        dtype=inputs.activation_dtype,
        micro_batches=1,
        sequence_parallel=inputs.sequence_parallel,
        vocab_parallel_loss=inputs.vocab_parallel_loss,
        learned_positions=shape.learned_position_embeddings,
    )

    def tp_items(**flags) -> list[PlannedCollective]:
        return megatron_collectives(**kwargs, **flags) if inputs.tp > 1 else []

    params = [p for unit in local for p in unit.parameters]
    embeddings = [p for unit in local if unit.is_root for p in unit.parameters if _is_embedding(p)]
    head = [p for unit in local if unit.is_root for p in unit.parameters if not _is_embedding(p)]
    blocks: list[_Block] = []
    if stage.index == 0:
        items = tp_items(layers=0, has_embedding=True, has_head=False)
        before, after = _gathers_first(_per_block(items, Phase.FORWARD, 1))
        blocks.append(_Block("embeddings", embeddings, 0, forward_before=before, forward_after=after))
    attention_scores = 4 * tokens * inputs.seq_len * shape.hidden_size // inputs.tp
    exchange = _expert_exchange(shape, inputs)
    for unit in (unit for unit in local if not unit.is_root):
        items = tp_items(layers=1, has_embedding=False, has_head=False)
        forward_before, forward_after = _gathers_first(_per_block(items, Phase.FORWARD, 2))
        backward_before, backward_after = _gathers_first(_per_block(items, Phase.BACKWARD, 2))
        for part, members in (
            ("attention", [p for p in unit.parameters if "attn" in p.name]),
            ("mlp", [p for p in unit.parameters if "attn" not in p.name]),
        ):
            if part == "mlp" and exchange and any(is_expert_parameter(p) for p in members):
                # Tokens go to their experts' ranks before the experts run and come back after; backward
                # mirrors it: the combine's gradient first, the dispatch's after the experts' backward.
                forward_before, forward_after = exchange.dispatch_forward, exchange.combine_forward
                backward_before, backward_after = exchange.combine_backward, exchange.dispatch_backward
            blocks.append(
                _Block(
                    f"{unit.name} {part}",
                    members,
                    _matmul_flops([p for p in members if not is_expert_parameter(p)], tokens, {})
                    + _routed_expert_flops(members, tokens, shape, inputs.ep),
                    attention_scores if part == "attention" else 0,
                    forward_before,
                    forward_after,
                    backward_before,
                    backward_after,
                )
            )
    if last:
        items = tp_items(layers=0, has_embedding=False, has_head=True)
        forward = _per_block(items, Phase.FORWARD, 1)
        # Sequence parallel gathers the head's input first; the loss's collectives follow the logits.
        split = 1 if inputs.sequence_parallel and inputs.tp > 1 else 0
        logits = 2 * tokens * shape.hidden_size * -(-shape.vocab_size // inputs.tp) if shape.tie_word_embeddings else 0
        blocks.append(
            _Block(
                "final norm and LM head",
                head,
                _matmul_flops(head, tokens, {}) + logits,
                forward_before=forward[:split],
                forward_after=forward[split:],
                backward_after=_per_block(items, Phase.BACKWARD, 1),
            )
        )
    assigned = {p.name for block in blocks for p in block.parameters}
    missing = [p for p in params if p.name not in assigned]
    if missing:  # pp = 1 keeps the whole root together; its embeddings sit with the first block
        blocks[0].parameters.extend(p for p in missing if _is_embedding(p))
        blocks[-1].parameters.extend(p for p in missing if not _is_embedding(p))
    return blocks


class _ExpertExchange(typing.NamedTuple):
    """One MoE layer's collectives for one micro-batch, around its experts: the dispatch's forward starts with
    the token counts' all-gather and sends the routing probabilities after the tokens (Megatron-core 0.12 on);
    its backward sends their gradients in the same order."""

    dispatch_forward: list[PlannedCollective]
    combine_forward: list[PlannedCollective]
    combine_backward: list[PlannedCollective]
    dispatch_backward: list[PlannedCollective]


def _expert_exchange(shape: TransformerShape, inputs: NormalisedInputs) -> _ExpertExchange | None:
    """None without EP."""
    if inputs.ep == 1 or shape.experts is None:
        return None
    forward, backward = token_all_to_alls(shape, inputs, 1)
    metadata = routing_metadata(shape, inputs, 1)

    def named(item: PlannedCollective, label: str) -> PlannedCollective:
        return item.model_copy(update={"label": label})

    return _ExpertExchange(
        [*metadata.token_counts, named(forward, "MoE token dispatch"), *metadata.probs_forward],
        [named(forward, "MoE token combine")],
        [named(backward, "MoE token combine gradient")],
        [named(backward, "MoE token dispatch gradient"), *metadata.probs_backward],
    )


def _routed_expert_flops(parameters: list[ParameterInfo], tokens: int, shape: TransformerShape, ep: int) -> int:
    """Each token passes through top_k of the layer's experts, not all of them: 2 FLOPs per weight
    element of top_k experts per token. ``parameters`` hold num_experts / ep experts; with an even load
    the tokens an EP rank receives cost what its own tokens would on all experts."""
    if shape.experts is None:
        return 0
    experts = shape.experts
    routed = sum(p.numel for p in parameters if is_expert_parameter(p))
    return 2 * tokens * routed * ep * experts.experts_per_token // experts.num_experts


def _is_embedding(param: ParameterInfo) -> bool:
    return any(name in param.name for name in _EMBEDDING_NAMES)


def _linear_blocks(stage: Stage, local: list, inputs: NormalisedInputs, inventory: ModelInventory) -> list[_Block]:
    positions = {a.module: prod(a.shape[1:]) for a in inventory.activations if len(a.shape) > 1}
    blocks = {
        unit.name: _Block(
            unit.name, list(unit.parameters), _matmul_flops(list(unit.parameters), inputs.micro_batch, positions)
        )
        for unit in local
    }
    if inputs.tp > 1:
        owner = {p.name: unit.name for unit in stage.units for p in unit.parameters}
        layers = linear_layers([p for unit in stage.units for p in unit.parameters])
        items = dtensor_linear_collectives(
            layers, inputs.micro_batch, inputs.tp, inputs.activation_dtype, 1, input_requires_grad=stage.index > 0
        )
        for item in items:
            module = item.label.split(" ")[0]
            block = blocks[owner[f"{module}.weight"]]
            (block.forward_after if item.phase is Phase.FORWARD else block.backward_after).append(item)
    return list(blocks.values())


class _RankBuilder:
    """Appends nodes for one rank, keeping the compute chain and what the next compute must wait for."""

    def __init__(self, compute: ComputeModel) -> None:
        self.compute_model = compute
        self.nodes: list[TraceNode] = []
        self.compute_tail: int | None = None
        self.waiting: list[int] = []  # results the next compute node needs

    def _add(self, **fields) -> TraceNode:
        node = TraceNode(id=len(self.nodes), **fields)
        self.nodes.append(node)
        return node

    def compute(self, name: str, flops: int) -> int:
        node = self._add(
            name=name,
            kind=NodeKind.COMPUTE,
            data_deps=self.waiting,
            ctrl_deps=[] if self.compute_tail is None else [self.compute_tail],
            flops=flops,
            duration_micros=self.compute_model.micros(flops),
        )
        self.waiting, self.compute_tail = [], node.id
        return node.id

    def collective(self, name: str, item: PlannedCollective, group_id: int, after: list[int]) -> int:
        return self._add(
            name=name,
            kind=NodeKind.COLLECTIVE,
            data_deps=after,
            ctrl_deps=[],
            op=item.op,
            comm_size=item.bytes_per_rank,
            bytes_total=item.bytes_total,
            group_id=group_id,
        ).id

    def blocking(self, name: str, items: list[PlannedCollective], groups: dict[ParallelDim, int]) -> list[int]:
        """Collectives in a row, each after the previous result, each in the rank's group of its dimension;
        returns the last one's id (or none)."""
        last = self.waiting or ([] if self.compute_tail is None else [self.compute_tail])
        for item in items:
            for _ in range(item.count_per_step):
                last = [self.collective(f"{name}: {item.label}", item, groups[item.parallel_dim], last)]
        return last if items else []

    def send(self, name: str, size: int, src: int, dst: int, tag: int) -> None:
        # The tensor sent is the last compute's output, joined by any collective still pending on it.
        after = self.waiting + ([] if self.compute_tail is None else [self.compute_tail])
        self._add(name=name, kind=NodeKind.SEND, data_deps=after, ctrl_deps=[], comm_size=size, bytes_total=size,
                  src=src, dst=dst, tag=tag)  # fmt: skip

    def recv(self, name: str, size: int, src: int, dst: int, tag: int) -> None:
        # Posted in schedule order, after the compute before it; the next compute waits for the data.
        after = [] if self.compute_tail is None else [self.compute_tail]
        node = self._add(name=name, kind=NodeKind.RECV, data_deps=[], ctrl_deps=after, comm_size=size,
                         bytes_total=size, src=src, dst=dst, tag=tag)  # fmt: skip
        self.waiting.append(node.id)


def one_f_one_b(stage: int, stages: int, micro_batches: int) -> list[tuple[Phase, int]]:
    """Megatron's 1F1B order on one stage: warm-up forwards, then one forward one backward, then cool-down."""
    warmup = min(stages - stage - 1, micro_batches)
    order = [(Phase.FORWARD, j) for j in range(warmup)]
    for i in range(micro_batches - warmup):
        order += [(Phase.FORWARD, warmup + i), (Phase.BACKWARD, i)]
    return order + [(Phase.BACKWARD, j) for j in range(micro_batches - warmup, micro_batches)]


def pipeline_tag(micro_batch: int, boundary: int, stages: int, backward: bool) -> int:
    """Unique per micro-batch, boundary and direction, so each receive matches exactly one send."""
    return 2 * (micro_batch * (stages - 1) + boundary) + int(backward)


def export_refusal(document: PlanDocument, inventory: ModelInventory) -> str | None:
    """Why ``document`` has no Chakra trace, field first as the export's 422 says it; None if it has one.
    The saved-plan page asks this too, so it never offers a download that would be refused."""
    inputs = document.inputs
    if document.mode is not Mode.FRAMEWORK:
        return (
            "mode: a Chakra trace follows the framework's schedule; this plan uses the tutorial rules "
            "(plan it again with mode framework)"
        )
    if inputs.dp > 1 and inputs.dp_impl is not DataParallelImpl.DDP:
        return f"dp_impl: the Chakra export schedules DDP data parallelism, not {inputs.dp_impl.value}"
    if inputs.dp > 1 and inputs.find_unused_parameters:
        return (
            "find_unused_parameters: the Chakra export schedules DDP's rebuilt buckets as backward makes them "
            "ready, not the construction-order buckets find_unused_parameters keeps"
        )
    shape = inventory.transformer
    if shape is not None and shape.experts is not None and inputs.tp > 1:
        return (
            f"tp: the Chakra export does not schedule a mixture of experts' tensor-parallel expert gathers "
            f"(this plan has tp {inputs.tp}); plan it with tp 1, or export its KCCB trials instead"
        )
    return None


def _rank_trace(
    role: RankRole,
    inputs: NormalisedInputs,
    inventory: ModelInventory,
    stages: list[Stage],
    boundaries: list[int],
    groups: CommGroups,
    compute: ComputeModel,
) -> RankTrace:
    stage = stages[role.stage]
    transformer = inventory.transformer is not None
    local = local_units(stage, inputs, transformer)
    last = role.stage == len(stages) - 1
    blocks = (
        _megatron_blocks(stage, local, inputs, inventory, last)
        if transformer
        else _linear_blocks(stage, local, inputs, inventory)
    )
    block_groups = {ParallelDim.TP: groups.id_of(f"tp dp{role.dp_index} stage{role.stage}") if inputs.tp > 1 else 0}
    if inputs.ep > 1:
        block_groups[ParallelDim.EP] = groups.id_of(_ep_group(role.dp_index, role.stage, role.tp_index, inputs.ep))
    builder = _RankBuilder(compute)

    # DDP buckets on the stage's local gradients, each started after the backward of the block that
    # produces its last gradient (the latest block in backward order among its tensors).
    backward_position = {p.name: index for index, block in enumerate(reversed(blocks)) for p in block.parameters}
    # DDP fills its buckets in gradient-ready order and leaves frozen parameters out, as the planner does.
    ready = {p.name: index for index, p in enumerate(inventory.gradient_ready_parameters())}
    # With EP the experts' gradients have their own buckets, reduced over the expert-data-parallel group.
    dense, experts = split_expert_units(local) if inputs.ep > 1 else (local, [])
    # One queue per data-parallel group: DDP launches a group's buckets in order, each once it is ready.
    queues: list[list[_Reduction]] = []
    for units, group_size, dim, kind in ((dense, inputs.dp, ParallelDim.DP, ""),
                                         (experts, inputs.dp // inputs.ep, ParallelDim.EDP, "expert ")):  # fmt: skip
        trainable = sorted(
            (p for unit in units for p in unit.parameters if p.name in ready), key=lambda p: ready[p.name]
        )
        if group_size == 1 or not trainable:
            continue
        group = (
            groups.id_of(f"dp stage{role.stage} tp{role.tp_index}")
            if dim is ParallelDim.DP
            else groups.id_of(_edp_group(role.dp_index % inputs.ep, role.stage, role.tp_index))
        )
        buckets = ddp_buckets(trainable, inputs.grad_dtype, inputs.bucket_cap_mb)
        queues.append(
            [
                _Reduction(
                    f"DDP {kind}bucket {index} all-reduce",
                    _bucket_collective(bucket, inputs, group_size, dim),
                    group,
                    max(backward_position[p.name] for p in bucket),
                )
                for index, bucket in enumerate(buckets)
            ]
        )
    step_collectives: list[int] = []

    def neighbour(stage_index: int) -> int:
        return rank_of(inputs, role.dp_index, stage_index, role.tp_index)

    def forward(j: int) -> None:
        if role.stage > 0:
            k = role.stage - 1
            tag = pipeline_tag(j, k, len(stages), backward=False)
            builder.recv(f"mb{j} recv activation from stage {k}", boundaries[k], neighbour(k), role.rank, tag)
        for block in blocks:
            builder.waiting += builder.blocking(f"mb{j} fwd {block.name}", block.forward_before, block_groups)
            builder.compute(f"mb{j} fwd {block.name}", block.matmul_flops + block.other_flops)
            builder.waiting += builder.blocking(f"mb{j} fwd {block.name}", block.forward_after, block_groups)
        if not last:
            tag = pipeline_tag(j, role.stage, len(stages), backward=False)
            size = boundaries[role.stage]
            builder.send(
                f"mb{j} send activation to stage {role.stage + 1}", size, role.rank, neighbour(role.stage + 1), tag
            )

    def backward(j: int) -> None:
        if not last:
            k = role.stage
            tag = pipeline_tag(j, k, len(stages), backward=True)
            builder.recv(f"mb{j} recv gradient from stage {k + 1}", boundaries[k], neighbour(k + 1), role.rank, tag)
        launched = [0] * len(queues)
        for position, block in enumerate(reversed(blocks)):
            builder.waiting += builder.blocking(f"mb{j} bwd {block.name}", block.backward_before, block_groups)
            builder.compute(f"mb{j} bwd input-grad {block.name}", block.matmul_flops + block.other_flops)
            # The weight gradient overlaps the input gradient's collective; the next block waits for it.
            joined = builder.blocking(f"mb{j} bwd {block.name}", block.backward_after, block_groups)
            weight_grad = builder.compute(f"mb{j} bwd weight-grad {block.name}", block.matmul_flops)
            builder.waiting += joined
            if j == inputs.micro_batches - 1:
                for index, queue in enumerate(queues):
                    while launched[index] < len(queue) and queue[launched[index]].ready_after <= position:
                        previous = step_collectives[-1:] if step_collectives else []
                        reduction = queue[launched[index]]
                        node = builder.collective(reduction.name, reduction.item, reduction.group, [weight_grad])
                        builder.nodes[node].ctrl_deps = previous  # one communicator stream: buckets in order
                        step_collectives.append(node)
                        launched[index] += 1
        if role.stage > 0:
            k = role.stage - 1
            tag = pipeline_tag(j, k, len(stages), backward=True)
            builder.send(f"mb{j} send gradient to stage {k}", boundaries[k], role.rank, neighbour(k), tag)

    for phase, j in one_f_one_b(role.stage, len(stages), inputs.micro_batches):
        (forward if phase is Phase.FORWARD else backward)(j)

    shape = inventory.transformer
    if len(stages) > 1 and shape is not None and shape.tie_word_embeddings and role.stage in (0, len(stages) - 1):
        size = tied_embedding_bytes(shape, inputs)
        item = PlannedCollective(
            op=CollectiveOp.ALL_REDUCE, bytes_total=size, bytes_per_rank=size, dtype=inputs.grad_dtype, group_size=2,
            count_per_step=1, phase=Phase.BACKWARD, parallel_dim=ParallelDim.PP, label="tied word-embedding gradients",
        )  # fmt: skip
        group = groups.id_of(f"embedding dp{role.dp_index} tp{role.tp_index}")
        after = [builder.compute_tail] if builder.compute_tail is not None else []
        step_collectives.append(builder.collective("tied word-embedding all-reduce", item, group, after))
    builder.waiting += step_collectives
    parameters = sum(p.numel for unit in local for p in unit.parameters)
    builder.compute("optimizer step", OPTIMIZER_FLOPS_PER_PARAMETER * parameters)
    return RankTrace(role, builder.nodes)


def _bucket_collective(
    bucket: list[ParameterInfo], inputs: NormalisedInputs, group_size: int, dim: ParallelDim
) -> PlannedCollective:
    size = sum(numel_bytes(p.numel, inputs.grad_dtype) for p in bucket)
    return PlannedCollective(
        op=CollectiveOp.ALL_REDUCE, bytes_total=size, bytes_per_rank=size, dtype=inputs.grad_dtype,
        group_size=group_size, count_per_step=1, phase=Phase.BACKWARD, parallel_dim=dim,
        label=f"DDP bucket ({len(bucket)} tensors)",
    )  # fmt: skip


def build_traces(
    document: PlanDocument, inventory: ModelInventory, compute: ComputeModel, ranks: list[int] | None = None
) -> TraceSet:
    """Per-rank traces of one steady-state training step of ``document`` (a framework-mode plan).

    ``ranks`` None: every rank up to ``MAX_ALL_RANKS``, else one rank per pipeline stage.
    """
    if (refusal := export_refusal(document, inventory)) is not None:
        raise ExportError(refusal)
    inputs = document.inputs
    stages = framework_stages(inventory, inputs)
    shape = inventory.transformer
    tied = inputs.pp > 1 and shape is not None and shape.tie_word_embeddings
    groups = _layout_groups(inputs, tied)
    boundaries = boundary_bytes(inventory, stages, inputs) if inputs.pp > 1 else []
    notes = []
    if ranks is None and inputs.gpus > MAX_ALL_RANKS:
        ranks = [rank_of(inputs, 0, s, 0) for s in range(inputs.pp)]
        notes.append(
            f"The plan has {inputs.gpus} ranks; this bundle holds one rank per pipeline stage ({len(ranks)} files: "
            f"ranks {', '.join(map(str, ranks))}). Every other rank of the same stage runs the same nodes with its "
            "own groups and peers; ask for more with --ranks / ?ranks=."
        )
    elif ranks is not None and len(ranks) < inputs.gpus:
        notes.append(f"Only the requested ranks were written: {', '.join(map(str, ranks))} of {inputs.gpus}.")
    wanted = range(inputs.gpus) if ranks is None else ranks
    traces = [
        _rank_trace(role_of(inputs, rank), inputs, inventory, stages, boundaries, groups, compute) for rank in wanted
    ]
    return TraceSet(traces, groups, compute, inputs.gpus, notes)
