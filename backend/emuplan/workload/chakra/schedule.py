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
from dataclasses import dataclass, field
from enum import StrEnum
from math import prod

from emuplan.workload.chakra.gpus import DEFAULT_GPU, DEFAULT_UTILISATION, GPUS, Gpu
from emuplan.workload.collectives import CollectiveOp, ideal_time_s
from emuplan.workload.document import NormalisedInputs, ParallelDim, Phase, PlanDocument, PlannedCollective
from emuplan.workload.inventory import ModelInventory, ParameterInfo, TransformerShape
from emuplan.workload.plan_options import DataParallelImpl, Mode
from emuplan.workload.planner import boundary_bytes, framework_stages, local_units, tied_embedding_bytes
from emuplan.workload.strategies.data_parallel import (
    SHARDED_UNITS,
    data_parallel_collectives,
    ddp_buckets,
    gathered_passes,
    micro_batch_note,
    reduces_every_micro_batch,
    reshards_after_backward,
)
from emuplan.workload.strategies.expert_parallel import (
    expert_bias_reduction,
    expert_tensor_collectives,
    has_expert_bias,
    is_expert_parameter,
    routing_metadata,
    split_expert_units,
    token_all_to_alls,
)
from emuplan.workload.strategies.pipeline_parallel import Stage, one_f_one_b
from emuplan.workload.strategies.tensor_parallel import (
    dtensor_linear_collectives,
    linear_layers,
    megatron_collectives,
    megatron_main_grad_dtype,
    sequence_parallel_parameters,
)

# Above this many ranks a bundle holds one rank per pipeline stage unless ranks are asked for.
MAX_ALL_RANKS = 16384
# A bundle's size grows with its ranks; past this, a request is more likely a typo than a need.
MAX_RANKS_PER_BUNDLE = 16384
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
    # Tuples: a node's parents are fixed once it is added (a list shared with the builder's pending
    # results once grew after the fact and made cycles).
    data_deps: tuple[int, ...]
    ctrl_deps: tuple[int, ...]
    flops: int = 0
    duration_micros: int = 0
    op: CollectiveOp | None = None
    comm_size: int = 0  # bytes as the simulators read them: ``simulated_comm_size``
    bytes_total: int = 0  # nccl-tests' whole buffer, as in the plan
    # Which of the rank's communicators a collective runs in (TP, DP, EP, EDP, or PP for the tied embedding's
    # first and last stage), and which stage a send or receive goes to: every rank of a stage runs the same
    # nodes, and the bundle writes each with its own group ids and peers.
    group: ParallelDim | None = None
    peer_stage: int | None = None
    tag: int | None = None


@dataclass(frozen=True)
class RankRole:
    rank: int
    dp_index: int
    stage: int
    tp_index: int


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

    def has(self, name: str) -> bool:
        return name in self._ids


@dataclass
class TraceSet:
    """The ranks to write and the nodes of their stages; ``rank_groups`` and ``peer`` give a rank its own."""

    inputs: NormalisedInputs
    stage_nodes: dict[int, list[TraceNode]]  # pipeline stage → the nodes every rank of it runs
    ranks: list[int]
    groups: CommGroups
    compute: ComputeModel
    notes: list[str]

    @property
    def world_size(self) -> int:
        return self.inputs.gpus

    def role(self, rank: int) -> RankRole:
        return role_of(self.inputs, rank)

    def rank_groups(self, role: RankRole) -> dict[ParallelDim, int]:
        """The id of each of ``role``'s communicators, by the dimension it serves."""
        inputs, names = self.inputs, {}
        if inputs.tp > 1:
            names[ParallelDim.TP] = f"tp dp{role.dp_index} stage{role.stage}"
        if inputs.dp > 1:
            names[ParallelDim.DP] = f"dp stage{role.stage} tp{role.tp_index}"
        if inputs.ep > 1:
            names[ParallelDim.EP] = _ep_group(role.dp_index, role.stage, role.tp_index, inputs.ep)
            if inputs.dp > inputs.ep:
                names[ParallelDim.EDP] = _edp_group(role.dp_index % inputs.ep, role.stage, role.tp_index)
            if inputs.tp > 1:
                names[ParallelDim.TP_EP] = _tp_ep_group(role.dp_index, role.stage, inputs.ep)
        if self.groups.has(f"tp-dp stage{role.stage}"):
            names[ParallelDim.TP_DP] = f"tp-dp stage{role.stage}"
        if role.stage in (0, inputs.pp - 1) and self.groups.has(f"embedding dp{role.dp_index} tp{role.tp_index}"):
            names[ParallelDim.PP] = f"embedding dp{role.dp_index} tp{role.tp_index}"
        return {dim: self.groups.id_of(name) for dim, name in names.items()}

    def peer(self, role: RankRole, stage: int) -> int:
        """The rank of ``role``'s pipeline at ``stage``."""
        return rank_of(self.inputs, role.dp_index, stage, role.tp_index)


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
    # Sequence parallel's all-gathers of a column-parallel input for its weight gradient: only that waits.
    weight_gradient_gathers: list[PlannedCollective] = field(default_factory=list)


@dataclass(frozen=True)
class _Reduction:
    """A DDP bucket's all-reduce (ZeRO-1/2: reduce-scatter), launched once the backward of block ``ready_after``
    (backward order) ends: in the last micro-batch, or in every one (``reduces_every_micro_batch``)."""

    name: str
    item: PlannedCollective
    ready_after: int


@dataclass(frozen=True)
class _UnitGather:
    """An FSDP2 / ZeRO-3 unit's parameter all-gather, needed by the pass's ``position``-th block; ``before``: whether
    it runs before each of the stage's passes in step order (``gathered_passes``)."""

    item: PlannedCollective
    position: int
    before: tuple[bool, ...]


def simulated_comm_size(item: PlannedCollective) -> int:
    """A COMM_COLL_NODE's ``comm_size`` as ASTRA-sim's system layer and Chakra's PyTorch converter read it:
    one rank's piece for all-gather, the whole input buffer for every other collective.

    ASTRA-sim (astra-sim/workload/Workload.cc ``Workload::issue_coll_comm``) hands ``comm_size`` to
    ``Sys::generate_all_reduce`` / ``_all_gather`` / ``_reduce_scatter`` / ``_all_to_all``, whose ring
    (astra-sim/system/collective/Ring.cc, ``Ring::Ring``) sends messages of size / n for all-reduce,
    reduce-scatter (ending with size / n) and all-to-all, but of size for all-gather (ending with
    size × n); a BROADCAST is replayed for the node's duration (``issue_coll_comm``: "TODO: implement
    broadcast"). Chakra's PyTorch converter (src/converter/pytorch_node.py, ``PyTorchNode.comm_size``)
    writes the bytes of the collective's input tensors: reduce_scatter_tensor's whole input,
    all_gather_into_tensor's one piece. The plan's ``bytes_per_rank`` (KCCB's data size) stays as it is.
    """
    return item.bytes_per_rank if item.op is CollectiveOp.ALL_GATHER else item.bytes_total


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


def _layout_groups(inputs: NormalisedInputs, tied_embedding: bool, expert_bias: bool = False) -> CommGroups:
    """Every group of the layout, in a fixed order, so ids do not depend on which ranks are written; a stage's
    TP×DP group only for an expert bias to reduce over it."""
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
            for first in range(0, inputs.dp, inputs.ep) if inputs.tp > 1 else ():
                replicas = range(first, first + inputs.ep)
                ranks = [rank_of(inputs, d, s, t) for d in replicas for t in range(inputs.tp)]
                groups.add(_tp_ep_group(first, s, inputs.ep), ranks)
        for s in range(inputs.pp):
            for t in range(inputs.tp):
                for offset in range(inputs.ep if inputs.dp > inputs.ep else 0):
                    replicas = range(offset, inputs.dp, inputs.ep)
                    groups.add(_edp_group(offset, s, t), [rank_of(inputs, d, s, t) for d in replicas])
    if expert_bias and inputs.tp > 1 and inputs.dp > 1:
        for s in range(inputs.pp):
            groups.add(
                f"tp-dp stage{s}", [rank_of(inputs, d, s, t) for d in range(inputs.dp) for t in range(inputs.tp)]
            )
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


def _tp_ep_group(dp_index: int, stage: int, ep: int) -> str:
    """Megatron's tp_ep_group: the TP groups of an EP group's replicas together (the token counts' gather)."""
    first = dp_index - dp_index % ep
    return f"tp-ep dp{first}-{first + ep - 1} stage{stage}"


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


def _weight_gradient_gathers(
    items: list[PlannedCollective],
) -> tuple[list[PlannedCollective], list[PlannedCollective]]:
    """The input gradient's collectives, and the all-gathers megatron_collectives labels as re-gathering a
    column-parallel input for its weight gradient."""
    gathers = [item for item in items if "re-gathered for weight gradient" in item.label]
    return [item for item in items if item not in gathers], gathers


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
        # Sequence parallel: the output gradient is gathered (its reduce-scatter's backward) before the lookup's.
        backward = _per_block(items, Phase.BACKWARD, 1)
        blocks.append(
            _Block("embeddings", embeddings, 0, forward_before=before, forward_after=after, backward_before=backward)
        )
    attention_scores = 4 * tokens * inputs.seq_len * shape.hidden_size // inputs.tp
    dispatcher = _token_dispatcher(shape, inputs)
    # A shared expert keeps the dense MLP's TP traffic beside the dispatcher's (the planner's expert_layers).
    shared_expert = shape.experts is not None and bool(shape.experts.shared_intermediate_size)
    for unit in (unit for unit in local if not unit.is_root):
        items = tp_items(layers=1, has_embedding=False, has_head=False)
        forward_before, forward_after = _gathers_first(_per_block(items, Phase.FORWARD, 2))
        backward_before, backward_after = _gathers_first(_per_block(items, Phase.BACKWARD, 2))
        backward_before, weight_gathers = _weight_gradient_gathers(backward_before)
        for part, members in (
            ("attention", [p for p in unit.parameters if "attn" in p.name]),
            ("mlp", [p for p in unit.parameters if "attn" not in p.name]),
        ):
            if part == "mlp" and dispatcher is not None and any(is_expert_parameter(p) for p in members):
                dense = (forward_before, forward_after, backward_before, backward_after, weight_gathers)
                if not shared_expert:
                    dense = ([],) * 5
                forward_before = dense[0] + dispatcher.forward_before
                forward_after = dispatcher.forward_after + dense[1]
                backward_before = dense[2] + dispatcher.backward_before
                backward_after = dispatcher.backward_after + dense[3]
                weight_gathers = dense[4]
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
                    weight_gathers,
                )
            )
    if last:
        items = tp_items(layers=0, has_embedding=False, has_head=True)
        forward = _per_block(items, Phase.FORWARD, 1)
        # Sequence parallel gathers the head's input first; the loss's collectives follow the logits.
        split = 1 if inputs.sequence_parallel and inputs.tp > 1 else 0
        logits = 2 * tokens * shape.hidden_size * -(-shape.vocab_size // inputs.tp) if shape.tie_word_embeddings else 0
        backward, weight_gathers = _weight_gradient_gathers(_per_block(items, Phase.BACKWARD, 1))
        blocks.append(
            _Block(
                "final norm and LM head",
                head,
                _matmul_flops(head, tokens, {}) + logits,
                forward_before=forward[:split],
                forward_after=forward[split:],
                backward_after=backward,
                weight_gradient_gathers=weight_gathers,
            )
        )
    assigned = {p.name for block in blocks for p in block.parameters}
    missing = [p for p in params if p.name not in assigned]
    if missing:  # pp = 1 keeps the whole root together; its embeddings sit with the first block
        blocks[0].parameters.extend(p for p in missing if _is_embedding(p))
        blocks[-1].parameters.extend(p for p in missing if not _is_embedding(p))
    return blocks


@dataclass(frozen=True)
class _Dispatcher:
    """Megatron's token dispatcher around one MoE layer's experts, per micro-batch (``MoEAlltoAllTokenDispatcher``
    in megatron/core/transformer/moe/token_dispatcher.py): the token counts' all-gather and, with EP, the
    dispatch all-to-all with the routing probabilities' after it (Megatron-core 0.12 on) before the experts, the
    combine after; with TP (expert-tensor-parallel = tp) the routed tokens and their probabilities all-gathered
    after the dispatch and the experts' output reduce-scattered before the combine. Backward mirrors it
    (expert_parallel.py's module docstring)."""

    forward_before: list[PlannedCollective]
    forward_after: list[PlannedCollective]
    backward_before: list[PlannedCollective]
    backward_after: list[PlannedCollective]


def _token_dispatcher(shape: TransformerShape, inputs: NormalisedInputs) -> _Dispatcher | None:
    """None where the experts' tokens stay put (no EP, no TP) or there are no experts."""
    if shape.experts is None or (inputs.ep == 1 and inputs.tp == 1):
        return None

    def named(item: PlannedCollective, label: str) -> list[PlannedCollective]:
        return [item.model_copy(update={"label": label})]

    dispatch, combine, combine_grad, dispatch_grad = [], [], [], []
    if inputs.ep > 1:
        forward, backward = token_all_to_alls(shape, inputs, 1)
        dispatch, combine = named(forward, "MoE token dispatch"), named(forward, "MoE token combine")
        combine_grad = named(backward, "MoE token combine gradient")
        dispatch_grad = named(backward, "MoE token dispatch gradient")
    gather, scatter, gather_grad, scatter_grad = [], [], [], []
    if inputs.tp > 1:
        gather, scatter, gather_grad, scatter_grad = ([item] for item in expert_tensor_collectives(shape, inputs, 1))
    metadata = routing_metadata(shape, inputs, 1)

    def over(items: list[PlannedCollective], dim: ParallelDim) -> list[PlannedCollective]:
        return [item for item in items if item.parallel_dim is dim]

    # dispatch_all_to_all() sends the probabilities after the tokens; dispatch_postprocess() gathers the
    # tokens over TP, then the probabilities.
    return _Dispatcher(
        [*metadata.token_counts, *dispatch, *over(metadata.probs_forward, ParallelDim.EP), *gather,
         *over(metadata.probs_forward, ParallelDim.TP)],
        [*scatter, *combine],
        [*combine_grad, *gather_grad],
        [*scatter_grad, *over(metadata.probs_backward, ParallelDim.TP), *dispatch_grad,
         *over(metadata.probs_backward, ParallelDim.EP)],
    )  # fmt: skip


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
        # The last collective in each communicator: NCCL runs a communicator's collectives in the order they
        # are launched, and every member must launch them in the same order, so each waits for the one before.
        self.group_tail: dict[ParallelDim, int] = {}

    def _add(self, data_deps: list[int], ctrl_deps: list[int], **fields) -> TraceNode:
        node = TraceNode(id=len(self.nodes), data_deps=tuple(data_deps), ctrl_deps=tuple(ctrl_deps), **fields)
        self.nodes.append(node)
        return node

    def tail(self) -> list[int]:
        return [] if self.compute_tail is None else [self.compute_tail]

    def compute(self, name: str, flops: int) -> int:
        node = self._add(
            name=name,
            kind=NodeKind.COMPUTE,
            data_deps=self.waiting,
            ctrl_deps=self.tail(),
            flops=flops,
            duration_micros=self.compute_model.micros(flops),
        )
        self.waiting, self.compute_tail = [], node.id
        return node.id

    def collective(self, name: str, item: PlannedCollective, after: list[int]) -> int:
        """A collective in the rank's communicator of ``item``'s dimension, once ``after`` are done."""
        dim = item.parallel_dim
        previous = [self.group_tail[dim]] if dim in self.group_tail and self.group_tail[dim] not in after else []
        node = self._add(
            name=name,
            kind=NodeKind.COLLECTIVE,
            data_deps=after,
            ctrl_deps=previous,
            op=item.op,
            comm_size=simulated_comm_size(item),
            bytes_total=item.bytes_total,
            group=dim,
            duration_micros=max(1, round(item.ideal_time_us)) if item.op is CollectiveOp.BROADCAST else 0,
        )
        self.group_tail[dim] = node.id
        return node.id

    def blocking(self, name: str, items: list[PlannedCollective]) -> list[int]:
        """Collectives in a row, each after the previous result; returns the last one's id (or none)."""
        last = [*self.waiting] or self.tail()
        for item in items:
            for _ in range(item.count_per_step):
                last = [self.collective(f"{name}: {item.label}", item, last)]
        return last if items else []

    def send(self, name: str, size: int, peer_stage: int, tag: int) -> None:
        # The tensor sent is the last compute's output, joined by any collective still pending on it.
        self._add(name=name, kind=NodeKind.SEND, data_deps=[*self.waiting, *self.tail()], ctrl_deps=[],
                  comm_size=size, bytes_total=size, peer_stage=peer_stage, tag=tag)  # fmt: skip

    def recv(self, name: str, size: int, peer_stage: int, tag: int) -> None:
        # Posted in schedule order, after the compute before it; the next compute waits for the data.
        node = self._add(name=name, kind=NodeKind.RECV, data_deps=[], ctrl_deps=self.tail(), comm_size=size,
                         bytes_total=size, peer_stage=peer_stage, tag=tag)  # fmt: skip
        self.waiting.append(node.id)


class _GatherQueue:
    """FSDP2's parameter all-gathers in one pass: each unit's before the first block that needs it, and the
    next one prefetched as that block starts (FSDP2 keeps one all-gather ahead of the compute)."""

    def __init__(self, builder: _RankBuilder, gathers: list[_UnitGather], name: str) -> None:
        self.builder, self.gathers, self.name = builder, gathers, name
        self.issued: list[int] = []

    def _issue(self) -> None:
        item = self.gathers[len(self.issued)].item
        self.issued.append(self.builder.collective(f"{self.name}: all-gather {item.label}", item, self.builder.tail()))

    def before(self, position: int) -> None:
        """Gathers the units block ``position`` needs, makes the next compute wait for them, prefetches one."""
        needed = [index for index, gather in enumerate(self.gathers) if gather.position == position]
        if not needed:
            return
        while len(self.issued) <= needed[-1]:
            self._issue()
        self.builder.waiting += [self.issued[index] for index in needed]
        if len(self.issued) < len(self.gathers):
            self._issue()


def pipeline_tag(micro_batch: int, boundary: int, stages: int, backward: bool) -> int:
    """Unique per micro-batch, boundary and direction, so each receive matches exactly one send."""
    return 2 * (micro_batch * (stages - 1) + boundary) + int(backward)


def export_refusal(document: PlanDocument, inventory: ModelInventory) -> str | None:
    """Why ``document`` has no Chakra trace, field first as the export's 422 says it; None if it has one.
    The saved-plan page asks this too, so it never offers a download that would be refused."""
    if document.mode is not Mode.FRAMEWORK:
        return (
            "mode: a Chakra trace follows the framework's schedule; this plan uses the tutorial rules "
            "(plan it again with mode framework)"
        )
    if document.inputs.dp > 1 and document.inputs.find_unused_parameters:
        return (
            "find_unused_parameters: the Chakra export schedules DDP's rebuilt buckets as backward makes them "
            "ready, not the construction-order buckets find_unused_parameters keeps"
        )
    return None


@dataclass
class _DataParallelTraffic:
    """One data-parallel group's traffic for a stage (all DP ranks; with EP also the experts' EDP group)."""

    units: list
    group_size: int
    items: list[PlannedCollective]  # data_parallel_collectives', as the planner lists them
    buckets: list[list[ParameterInfo]]  # DDP / ZeRO-1/2 buckets, in launch order


def _data_parallel_traffic(
    local: list, inputs: NormalisedInputs, inventory: ModelInventory, stage_index: int
) -> list[_DataParallelTraffic]:
    """The stage's data-parallel collectives from the planner's own function, per group."""
    ready = {p.name: index for index, p in enumerate(inventory.gradient_ready_parameters())}
    dense, experts = split_expert_units(local) if inputs.ep > 1 else (local, [])
    # PyTorch's DDP broadcasts module buffers each step; Megatron's own DDP (TP on a transformer) does not.
    buffers = inventory.buffers if inventory.transformer is None or inputs.tp == 1 else []
    traffic = []
    for units, group_size, dim, group_buffers in ((dense, inputs.dp, ParallelDim.DP, buffers),
                                                  (experts, inputs.dp // inputs.ep, ParallelDim.EDP, [])):  # fmt: skip
        if group_size == 1 or not units:
            continue
        items = data_parallel_collectives(
            inputs.dp_impl, units, ready, group_size, inputs.param_dtype, inputs.grad_dtype, inputs.bucket_cap_mb,
            buffers=group_buffers, dim=dim, micro_batches=inputs.micro_batches, pp=inputs.pp, stage=stage_index,
            persistence_threshold=inputs.persistence_threshold or 0,
        )  # fmt: skip
        trainable = sorted(
            (p for unit in units for p in unit.parameters if p.name in ready), key=lambda p: ready[p.name]
        )
        buckets = ddp_buckets(trainable, inputs.grad_dtype, inputs.bucket_cap_mb)
        traffic.append(_DataParallelTraffic(units, group_size, items, buckets))
    return traffic


def _layer_norm_reduction(stage: Stage, inputs: NormalisedInputs, inventory: ModelInventory) -> list[PlannedCollective]:
    """Sequence parallel's once-per-step TP all-reduce of the stage's layer-norm (and row-parallel bias,
    router) gradients, as the planner sizes it: ``megatron_collectives``' ``layer_norm_numel`` in ``main_grad``'s
    dtype."""
    shape = inventory.transformer
    if shape is None or inputs.tp == 1 or not inputs.sequence_parallel:
        return []
    marked = sequence_parallel_parameters([p for unit in stage.units for p in unit.parameters])
    return megatron_collectives(
        hidden=shape.hidden_size, vocab=shape.vocab_size, tokens=inputs.micro_batch * inputs.seq_len, tp=inputs.tp,
        dtype=inputs.activation_dtype, layers=0, micro_batches=1, sequence_parallel=True, has_embedding=False,
        has_head=False, vocab_parallel_loss=inputs.vocab_parallel_loss,
        layer_norm_numel=sum(p.numel for p in marked), main_grad_dtype=megatron_main_grad_dtype(inputs),
    )  # fmt: skip


def _ideal_micros(item: PlannedCollective, inputs: NormalisedInputs) -> float:
    return ideal_time_s(item.op, item.bytes_total, item.group_size, inputs.link_gbps, inputs.latency_us) * 1e6


def _spelled(op: CollectiveOp) -> str:
    return op.value.replace("_", "-")


def _stage_trace(
    stage_index: int,
    inputs: NormalisedInputs,
    inventory: ModelInventory,
    stages: list[Stage],
    boundaries: list[int],
    compute: ComputeModel,
) -> list[TraceNode]:
    """The nodes every rank of pipeline stage ``stage_index`` runs in one step."""
    stage = stages[stage_index]
    transformer = inventory.transformer is not None
    local = local_units(stage, inputs, transformer)
    last = stage_index == len(stages) - 1
    micro_batches = inputs.micro_batches
    blocks = (
        _megatron_blocks(stage, local, inputs, inventory, last)
        if transformer
        else _linear_blocks(stage, local, inputs, inventory)
    )
    builder = _RankBuilder(compute)
    block_of = {p.name: index for index, block in enumerate(blocks) for p in block.parameters}
    traffic = _data_parallel_traffic(local, inputs, inventory, stage_index)
    impl = inputs.dp_impl
    sharded_units = impl in SHARDED_UNITS
    every_micro_batch = reduces_every_micro_batch(impl, inputs.pp)

    # DDP (ZeRO-1/2: reduce-scatter) buckets, each started after the backward of the block that produces its
    # last gradient (the latest block in backward order among its tensors); one queue per group, in order.
    backward_position = {name: len(blocks) - 1 - index for name, index in block_of.items()}
    reducing = CollectiveOp.ALL_REDUCE if impl is DataParallelImpl.DDP else CollectiveOp.REDUCE_SCATTER
    kind = "DDP" if impl is DataParallelImpl.DDP else impl.value
    queues = [
        [
            _Reduction(
                f"{kind} {'expert ' if item.parallel_dim is ParallelDim.EDP else ''}bucket {index} {_spelled(item.op)}",
                item,
                max(backward_position[p.name] for p in bucket),
            )
            for index, (item, bucket) in enumerate(
                zip([i for i in group.items if i.op is reducing], group.buckets, strict=True)
            )
        ]
        for group in traffic
        if not sharded_units
    ]
    # ASTRA-sim replays a broadcast for its node's duration rather than simulating it (Workload.cc,
    # ``Workload::issue_coll_comm``: "TODO: implement broadcast"): the plan's α-β time at its link figures.
    broadcasts = [
        item.model_copy(update={"ideal_time_us": _ideal_micros(item, inputs)})
        for group in traffic
        for item in group.items
        if item.op is CollectiveOp.BROADCAST
    ]
    # After the optimizer step: ZeRO-1/2's updated parameters, ZeRO-3's persistent ones.
    updated = [
        item for group in traffic for item in group.items
        if item.op is CollectiveOp.ALL_GATHER and item.phase is Phase.OPTIMIZER
    ]  # fmt: skip

    # FSDP2 / ZeRO-3: a unit's all-gather before its first block forward (the root's at the start) and
    # before its last block backward, in the passes it is sharded before; its gradients reduce-scattered once
    # its backward is done (roots' last) in every micro-batch, or all after the last backward (pipelined FSDP2).
    passes = one_f_one_b(stage_index, len(stages), micro_batches)
    pass_index = {step: index for index, step in enumerate(passes)}
    reshard = reshards_after_backward(impl, inputs.pp)
    forward_gathers: list[_UnitGather] = []
    backward_gathers: list[_UnitGather] = []
    scatters: dict[int, list[PlannedCollective]] = {}  # backward position after which they start
    root_scatters: list[PlannedCollective] = []
    for group in traffic if sharded_units else []:
        by_name = {unit.name: unit for unit in group.units}
        for item in (item for item in group.items if item.phase is not Phase.OPTIMIZER):
            unit = by_name[item.label.rsplit(" ", 1)[0]]
            indices = [block_of[p.name] for p in unit.parameters]
            before = tuple(gathered_passes([phase for phase, _ in passes], unit.is_root, reshard))
            if item.op is CollectiveOp.ALL_GATHER and item.phase is Phase.FORWARD:
                forward_gathers.append(_UnitGather(item, 0 if unit.is_root else min(indices), before))
            elif item.op is CollectiveOp.ALL_GATHER:
                backward_gathers.append(_UnitGather(item, len(blocks) - 1 - max(indices), before))
            elif unit.is_root:
                root_scatters.append(item)
            else:
                scatters.setdefault(len(blocks) - 1 - min(indices), []).append(item)
    forward_gathers.sort(key=lambda gather: gather.position)
    backward_gathers.sort(key=lambda gather: gather.position)
    step_collectives: list[int] = []

    def scattered(name: str, items: list[PlannedCollective]) -> None:
        for item in items:
            step_collectives.append(
                builder.collective(f"{name}{kind} {_spelled(item.op)} {item.label}", item, builder.tail())
            )

    def sharded_before(gathers: list[_UnitGather], phase: Phase, j: int) -> list[_UnitGather]:
        return [gather for gather in gathers if gather.before[pass_index[(phase, j)]]]

    def forward(j: int) -> None:
        if stage_index > 0:
            k = stage_index - 1
            tag = pipeline_tag(j, k, len(stages), backward=False)
            builder.recv(f"mb{j} recv activation from stage {k}", boundaries[k], k, tag)
        if j == 0:  # DDP broadcasts the module buffers as the step's first forward starts
            builder.waiting += builder.blocking("mb0 fwd: DDP", broadcasts)
        gathers = _GatherQueue(builder, sharded_before(forward_gathers, Phase.FORWARD, j), f"mb{j} fwd")
        for position, block in enumerate(blocks):
            gathers.before(position)
            builder.waiting += builder.blocking(f"mb{j} fwd {block.name}", block.forward_before)
            builder.compute(f"mb{j} fwd {block.name}", block.matmul_flops + block.other_flops)
            builder.waiting += builder.blocking(f"mb{j} fwd {block.name}", block.forward_after)
        if not last:
            tag = pipeline_tag(j, stage_index, len(stages), backward=False)
            builder.send(f"mb{j} send activation to stage {stage_index + 1}", boundaries[stage_index],
                         stage_index + 1, tag)  # fmt: skip

    def backward(j: int) -> None:
        if not last:
            k = stage_index
            tag = pipeline_tag(j, k, len(stages), backward=True)
            builder.recv(f"mb{j} recv gradient from stage {k + 1}", boundaries[k], k + 1, tag)
        launched = [0] * len(queues)
        gathers = _GatherQueue(builder, sharded_before(backward_gathers, Phase.BACKWARD, j), f"mb{j} bwd")
        last_micro_batch = j == micro_batches - 1
        reduced = f"mb{j} " if every_micro_batch else ""  # names the micro-batch when each one reduces
        for position, block in enumerate(reversed(blocks)):
            gathers.before(position)
            builder.waiting += builder.blocking(f"mb{j} bwd {block.name}", block.backward_before)
            # Megatron launches the weight gradient's input all-gather before the input gradient's matmul and
            # waits for it only before the weight gradient's (megatron/core/tensor_parallel/layers.py,
            # LinearWithGradAccumulationAndAsyncCommunication.backward).
            gathered = builder.blocking(f"mb{j} bwd {block.name}", block.weight_gradient_gathers)
            builder.compute(f"mb{j} bwd input-grad {block.name}", block.matmul_flops + block.other_flops)
            # The weight gradient overlaps the input gradient's collective; the next block waits for it.
            joined = builder.blocking(f"mb{j} bwd {block.name}", block.backward_after)
            builder.waiting += gathered
            weight_grad = builder.compute(f"mb{j} bwd weight-grad {block.name}", block.matmul_flops)
            builder.waiting += joined
            for item in scatters.get(position, []) if every_micro_batch else []:
                step_collectives.append(
                    builder.collective(f"{reduced}{kind} {_spelled(item.op)} {item.label}", item, [weight_grad])
                )
            for index, queue in enumerate(queues) if last_micro_batch or every_micro_batch else []:
                while launched[index] < len(queue) and queue[launched[index]].ready_after <= position:
                    reduction = queue[launched[index]]
                    step_collectives.append(builder.collective(reduced + reduction.name, reduction.item, [weight_grad]))
                    launched[index] += 1
        if every_micro_batch:  # FSDP2 reduce-scatters the root's gradients as each backward ends
            scattered(reduced, root_scatters)
        if stage_index > 0:
            k = stage_index - 1
            tag = pipeline_tag(j, k, len(stages), backward=True)
            builder.send(f"mb{j} send gradient to stage {k}", boundaries[k], k, tag)

    for phase, j in passes:
        (forward if phase is Phase.FORWARD else backward)(j)

    if sharded_units and not every_micro_batch:
        # torch.distributed.pipelining's perform_reduce_grad after the last backward: the root, then the layers.
        scattered(
            "", root_scatters + [item for position in sorted(scatters, reverse=True) for item in scatters[position]]
        )
    # Then Megatron's finalize_model_grads (megatron/core/distributed/finalize_model_grads.py): it waits for
    # the data-parallel gradient sync (``finish_grad_sync``), then all-reduces the layer norms' gradients over
    # TP, then the tied word embedding's over its first and last stage, each a blocking call on the result
    # of the one before.
    finals = [
        ("sequence-parallel layer-norm all-reduce", item) for item in _layer_norm_reduction(stage, inputs, inventory)
    ]
    shape = inventory.transformer
    if len(stages) > 1 and shape is not None and shape.tie_word_embeddings and stage_index in (0, len(stages) - 1):
        size = tied_embedding_bytes(shape, inputs)
        item = PlannedCollective(
            op=CollectiveOp.ALL_REDUCE, bytes_total=size, bytes_per_rank=size, dtype=inputs.grad_dtype, group_size=2,
            count_per_step=1, phase=Phase.BACKWARD, parallel_dim=ParallelDim.PP, label="tied word-embedding gradients",
        )  # fmt: skip
        finals.append(("tied word-embedding all-reduce", item))
    if shape is not None and shape.experts is not None:  # then the routers' expert bias (_update_router_expert_bias)
        finals += [
            ("expert-bias all-reduce", item)
            for item in expert_bias_reduction(inventory.buffers, stage.units, shape.experts.num_experts, inputs)
        ]
    synced = [*builder.tail(), *step_collectives]
    for name, item in finals:
        synced = [builder.collective(name, item, synced)]
        step_collectives += synced
    builder.waiting += step_collectives
    # Sharded optimizers (ZeRO, FSDP2) update only the rank's share of each data-parallel group's parameters.
    parameters = sum(p.numel for unit in local for p in unit.parameters)
    if impl is not DataParallelImpl.DDP:
        for group in traffic:
            held = sum(p.numel for unit in group.units for p in unit.parameters)
            parameters -= held - held // group.group_size
    optimizer = builder.compute("optimizer step", OPTIMIZER_FLOPS_PER_PARAMETER * parameters)
    for item in updated:  # ZeRO-1/2: every rank gathers the others' updated parameters
        builder.collective(f"{kind} all-gather {item.label}", item, [optimizer])
    return builder.nodes


def build_traces(
    document: PlanDocument, inventory: ModelInventory, compute: ComputeModel, ranks: list[int] | None = None
) -> TraceSet:
    """The nodes of one steady-state training step of ``document`` (a framework-mode plan) for every stage
    ``ranks`` (None: every rank up to ``MAX_ALL_RANKS``, else one rank per pipeline stage) run; every rank of
    a stage runs the same nodes with its own groups and peers, so each stage is built once."""
    if (refusal := export_refusal(document, inventory)) is not None:
        raise ExportError(refusal)
    inputs = document.inputs
    stages = framework_stages(inventory, inputs)
    shape = inventory.transformer
    tied = inputs.pp > 1 and shape is not None and shape.tie_word_embeddings
    groups = _layout_groups(inputs, tied, shape is not None and has_expert_bias(inventory.buffers))
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
        notes.append(f"Only the requested ranks were written: {rank_ranges(ranks)} of {inputs.gpus}.")
    if inputs.dp > 1 and (accumulation := micro_batch_note(inputs.dp_impl, inputs.micro_batches, inputs.pp)):
        notes.append(accumulation)
    wanted = list(range(inputs.gpus)) if ranks is None else ranks
    needed = sorted({role_of(inputs, rank).stage for rank in wanted})
    stage_nodes = {s: _stage_trace(s, inputs, inventory, stages, boundaries, compute) for s in needed}
    return TraceSet(inputs, stage_nodes, wanted, groups, compute, notes)


def rank_ranges(ranks: list[int]) -> str:
    """[0, 1, 2, 3, 7] → '0-3, 7'."""
    runs: list[list[int]] = []
    for rank in ranks:
        if runs and rank == runs[-1][1] + 1:
            runs[-1][1] = rank
        else:
            runs.append([rank, rank])
    return ", ".join(f"{first}-{last}" if last > first else str(first) for first, last in runs)
