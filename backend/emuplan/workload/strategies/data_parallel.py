"""Data-parallel traffic as PyTorch DDP, FSDP2 and DeepSpeed ZeRO issue it.

DDP: gradients are all-reduced in buckets filled in the order backward completes them (DDP rebuilds
its buckets after iteration 0 in that order; for a model whose forward runs its modules in
registration order it is the reverse registration order); frozen parameters have no gradient and
no bucket; a tensor is never split. With ``bucket_cap_mb`` left at PyTorch's default the first
bucket closes once it holds ≥ 1 MiB and later ones at ≥ 25 MiB; an explicit ``bucket_cap_mb`` applies
to the first bucket too (torch 2.13's ``_BucketCapacityConfig``). This is
``torch.distributed._compute_bucket_assignment_by_size`` on the parameters in gradient-ready order
with those limits, i.e. the buckets DDP rebuilds after iteration 0 (iteration 0 itself runs with a
single bucket). Before every forward DDP also broadcasts all module buffers (BatchNorm statistics,
rotary frequencies) from rank 0, coalesced per dtype into buffers of at most 250 MiB.

DDP with ``find_unused_parameters=True`` never rebuilds its buckets (``Reducer::should_rebuild_buckets``
is false for it): it keeps the ones it built at construction, filled in registration order with the same
limits and launched last-filled first (``DistributedDataParallel._ddp_init_helper`` hands the reducer
``reversed(bucket_indices)``). After the buckets it all-reduces its map of the parameters each rank used
(``Reducer::all_reduce_local_used_map``: one int32 per trainable parameter), every step.

FSDP2 (``fully_shard`` per layer and on the root): each unit's parameters are all-gathered before
its forward, again before its backward (non-root units reshard after forward), and its gradients
reduce-scattered. Every tensor's dim 0 is padded to a multiple of the group size. A unit is gathered
before a forward or backward pass only if it is sharded then (``gathered_passes``).

ZeRO-1/2: gradients reduce-scattered and updated parameters all-gathered once per step (2Ψ per
rank), in buckets like DDP's, the flat buffer padded to a multiple of the group size. ZeRO-3: like
FSDP2 but one flat buffer per unit (3Ψ), without its persistent parameters: those of at most
``stage3_param_persistence_threshold`` elements (default 100,000: deepspeed/runtime/zero/config.py,
``param_persistence_threshold``; ``param.ds_numel <= param_threshold`` in
deepspeed/runtime/zero/parameter_offload.py, ``DeepSpeedZeRoOffload.mark_persistent_parameters``) stay whole on
every rank and are never gathered for a pass; their gradients are reduce-scattered with the rest, and after each
optimizer step one coalesced all-gather brings every rank their updated values
(deepspeed/runtime/zero/stage3.py, ``_post_step``: ``self.persistent_parameters[0].all_gather(
self.persistent_parameters)``), each parameter's partition padded to a multiple of the group size.

Gradient accumulation (``micro_batches`` > 1, pp = 1): FSDP2 by default (``requires_gradient_sync`` left True)
gathers and reduce-scatters every unit in every micro-batch, root included (measured on gloo:
tests/unit/test_fsdp_micro_batches.py); ``set_requires_gradient_sync(False)`` before all but the last
would keep the gathers and drop all but the last reduce-scatters. DeepSpeed ZeRO-2/3 reduce in every
micro-batch and cannot do otherwise (deepspeed/runtime/engine.py: ``allreduce_gradients`` — "ZeRO stage >= 2
communicates during non gradient accumulation boundaries as well" — and ``no_sync`` asserts it "is
incompatible with gradient partitioning logic of ZeRO stage 2"); ZeRO-1 reduces only at the accumulation
boundary, and ZeRO-1/2 gather the updated parameters once, after the optimizer step. DDP is planned with
``no_sync`` on all but the last micro-batch, as Megatron runs it. Under pipeline parallelism FSDP2 runs as
``torch.distributed.pipelining`` drives it (stage.py: ``set_requires_gradient_sync(False)`` and
``set_reshard_after_backward(False)`` for every micro-batch's backward, then one ``perform_reduce_grad``):
one reduce-scatter per unit and step, after the last backward, and parameters kept unsharded after each
backward, so a layer is gathered m + 1 times a step and the root once (measured on gloo, 2 stages × 2
replicas, GPipe and 1F1B: tests/unit/test_fsdp_micro_batches.py).
"""

from collections.abc import Sequence

from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import ParallelDim, Phase, PlannedCollective
from emuplan.workload.inventory import BufferInfo, ParameterInfo
from emuplan.workload.plan_options import DataParallelImpl
from emuplan.workload.strategies.common import Unit, collective, numel_bytes
from emuplan.workload.strategies.pipeline_parallel import one_f_one_b

FIRST_BUCKET_BYTES = 1024 * 1024  # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES
DEFAULT_BUCKET_CAP_MB = 25  # torch.nn.parallel.distributed._DEFAULT_BUCKET_CAP_MB
MIB = 1024 * 1024
BUFFER_BROADCAST_BYTES = 250 * MIB  # DistributedDataParallel.broadcast_bucket_size
ZERO3_PERSISTENCE_THRESHOLD = 100_000  # DeepSpeed's stage3_param_persistence_threshold default (1e5 elements)


def ddp_bucket_limits(bucket_cap_mb: float | None) -> list[int]:
    """The [first, later] bucket limits DDP hands its reducer for ``bucket_cap_mb`` (None: the default)."""
    if bucket_cap_mb is None:
        return [FIRST_BUCKET_BYTES, DEFAULT_BUCKET_CAP_MB * MIB]
    cap = int(bucket_cap_mb * MIB)
    return [cap, cap]


def bucket_assignment(sizes_in_bytes: Sequence[int], bucket_limits: Sequence[int]) -> list[list[int]]:
    """Indices per bucket, filling in the given order; the limit advances after each closed bucket."""
    buckets: list[list[int]] = []
    current: list[int] = []
    current_bytes, limit_index = 0, 0
    for index, size in enumerate(sizes_in_bytes):
        current.append(index)
        current_bytes += size
        if current_bytes >= bucket_limits[limit_index]:
            buckets.append(current)
            current, current_bytes = [], 0
            limit_index = min(limit_index + 1, len(bucket_limits) - 1)
    if current:
        buckets.append(current)
    return buckets


def ddp_buckets(
    ready_parameters: Sequence[ParameterInfo], grad_dtype: str, bucket_cap_mb: float | None
) -> list[list[ParameterInfo]]:
    """DDP's steady-state gradient buckets, in the order their all-reduces are launched, from the
    trainable parameters in gradient-ready order."""
    sizes = [numel_bytes(p.numel, grad_dtype) for p in ready_parameters]
    buckets = bucket_assignment(sizes, ddp_bucket_limits(bucket_cap_mb))
    return [[ready_parameters[i] for i in bucket] for bucket in buckets]


def ddp_construction_buckets(
    registered: Sequence[ParameterInfo], grad_dtype: str, bucket_cap_mb: float | None
) -> list[list[ParameterInfo]]:
    """The buckets DDP builds at construction, in launch order, from the trainable parameters in registration
    order: with find_unused_parameters=True they are the steady state."""
    sizes = [numel_bytes(p.numel, grad_dtype) for p in registered]
    buckets = bucket_assignment(sizes, ddp_bucket_limits(bucket_cap_mb))
    return [[registered[i] for i in bucket] for bucket in reversed(buckets)]


def buffer_broadcasts(buffers: Sequence[BufferInfo]) -> list[list[BufferInfo]]:
    """The coalesced broadcasts DDP sends before each forward (c10d's ``broadcast_coalesced``): buffers
    grouped by dtype, each group cut at 250 MiB, groups in order of their first buffer."""
    by_dtype: dict[str, list[BufferInfo]] = {}
    for buffer in buffers:
        by_dtype.setdefault(buffer.dtype, []).append(buffer)
    groups = []
    for same_dtype in by_dtype.values():
        sizes = [b.nbytes for b in same_dtype]
        groups += [[same_dtype[i] for i in group] for group in bucket_assignment(sizes, [BUFFER_BROADCAST_BYTES])]
    position = {buffer.name: index for index, buffer in enumerate(buffers)}
    return sorted(groups, key=lambda group: position[group[0].name])


SHARDED_UNITS = (DataParallelImpl.FSDP2, DataParallelImpl.ZERO3)


def reduces_every_micro_batch(impl: DataParallelImpl, pp: int) -> bool:
    """Whether the gradients are reduced (reduce-scattered) in every micro-batch's backward rather than once per
    step: FSDP2's default without pipelining, DeepSpeed ZeRO-2 and ZeRO-3 always."""
    if impl is DataParallelImpl.FSDP2:
        return pp == 1
    return impl in (DataParallelImpl.ZERO2, DataParallelImpl.ZERO3)


def reshards_after_backward(impl: DataParallelImpl, pp: int) -> bool:
    """Whether a sharded unit frees its gathered parameters after each backward: FSDP2's default and ZeRO-3 do;
    torch.distributed.pipelining keeps FSDP2's unsharded until its one reduce per step."""
    return not (impl is DataParallelImpl.FSDP2 and pp > 1)


def gathered_passes(passes: Sequence[Phase], is_root: bool, reshard_after_backward: bool) -> list[bool]:
    """Whether a sharded unit is all-gathered before each of a stage's forward and backward passes in a step, in
    the order they run: only when it is sharded then. It starts sharded; a non-root unit reshards after its
    forward (the root stays unsharded for its backward), and every unit after its backward when
    ``reshard_after_backward``."""
    sharded, gathered = True, []
    for phase in passes:
        gathered.append(sharded)
        sharded = (phase is Phase.BACKWARD and reshard_after_backward) or (phase is Phase.FORWARD and not is_root)
    return gathered


def micro_batch_note(impl: DataParallelImpl, micro_batches: int, pp: int) -> str | None:
    """What the plan assumes data parallelism does over a step's micro-batches (None for one micro-batch)."""
    if micro_batches == 1:
        return None
    gathers = (
        "each layer's parameters all-gathered before the step's first pass and after every forward "
        f"({micro_batches + 1} per step), the root's once (pipelining keeps them unsharded after backward)"
        if impl is DataParallelImpl.FSDP2 and pp > 1
        else "parameters all-gathered for every micro-batch's forward and backward"
        if impl in SHARDED_UNITS
        else "updated parameters all-gathered once, after the optimizer step"
        if impl in (DataParallelImpl.ZERO1, DataParallelImpl.ZERO2)
        else None
    )
    if reduces_every_micro_batch(impl, pp):
        reductions = f"gradients reduce-scattered in every micro-batch's backward ({micro_batches} per step)"
    elif impl is DataParallelImpl.DDP:
        reductions = "gradients all-reduced once, in the last micro-batch's backward (no_sync before the others)"
    elif impl is DataParallelImpl.FSDP2:
        reductions = "gradients reduce-scattered once, after the last micro-batch's backward"
    else:
        reductions = "gradients reduce-scattered once, in the last micro-batch's backward"
    why = {
        DataParallelImpl.DDP: "DDP with no_sync on all but the last micro-batch, as Megatron runs it",
        DataParallelImpl.FSDP2: (
            "FSDP2's default (requires_gradient_sync left True); set_requires_gradient_sync(False) on all but the "
            "last micro-batch would reduce-scatter once"
            if pp == 1
            else "FSDP2 as torch.distributed.pipelining drives it: gradient sync off in every micro-batch, then "
            "one reduce per step"
        ),
        DataParallelImpl.ZERO1: "DeepSpeed ZeRO-1 reduces only at the gradient-accumulation boundary",
        DataParallelImpl.ZERO2: "DeepSpeed ZeRO-2 reduces in every micro-batch (its no_sync is refused)",
        DataParallelImpl.ZERO3: "DeepSpeed ZeRO-3 reduces in every micro-batch (its no_sync is refused)",
    }[impl]
    done = "; ".join(part for part in (gathers, reductions) if part)
    return f"Gradient accumulation over {micro_batches} micro-batches: {done} — {why}."


def _bucket_label(index: int, bucket: list[ParameterInfo]) -> str:
    if len(bucket) == 1:
        return f"bucket {index} ({bucket[0].name})"
    return f"bucket {index} ({len(bucket)} tensors: {bucket[0].name} … {bucket[-1].name})"


def _padded_numel(param: ParameterInfo, group_size: int) -> int:
    """FSDP2 shards dim 0 and pads it up to a multiple of the group size."""
    if not param.shape:
        return group_size
    rows = -(-param.shape[0] // group_size) * group_size
    return param.numel // param.shape[0] * rows if param.shape[0] else 0


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _ddp_collectives(
    buckets: list[list[ParameterInfo]],
    group_size: int,
    grad_dtype: str,
    buffers: Sequence[BufferInfo],
    label_prefix: str,
    dim: ParallelDim,
) -> list[PlannedCollective]:
    """The buffer broadcasts before forward, then one all-reduce per bucket."""
    broadcasts = [
        collective(
            CollectiveOp.BROADCAST,
            sum(b.nbytes for b in group),
            group_size,
            group[0].dtype,
            Phase.FORWARD,
            dim,
            label_prefix + f"buffers from rank 0 ({len(group)} × {group[0].dtype}: {group[0].name} …)",
        )
        for group in buffer_broadcasts(buffers)
    ]
    return broadcasts + [
        collective(
            CollectiveOp.ALL_REDUCE,
            sum(numel_bytes(p.numel, grad_dtype) for p in bucket),
            group_size,
            grad_dtype,
            Phase.BACKWARD,
            dim,
            label_prefix + _bucket_label(index, bucket),
        )
        for index, bucket in enumerate(buckets)
    ]


def data_parallel_collectives(
    impl: DataParallelImpl,
    units: list[Unit],
    gradient_position: dict[str, int],
    group_size: int,
    param_dtype: str,
    grad_dtype: str,
    bucket_cap_mb: float | None,
    label_prefix: str = "",
    buffers: Sequence[BufferInfo] = (),
    dim: ParallelDim = ParallelDim.DP,
    find_unused_parameters: bool = False,
    micro_batches: int = 1,
    pp: int = 1,
    stage: int = 0,
    persistence_threshold: int = 0,
) -> list[PlannedCollective]:
    """``gradient_position`` (trainable parameter name → its place in gradient-ready order) orders
    DDP's and ZeRO's buckets; parameters it leaves out are frozen. ``buffers``: what DDP broadcasts.
    ``dim``: DP, or EDP for the experts' gradients under expert parallelism. ``find_unused_parameters``:
    DDP's, which never rebuilds its buckets; ``gradient_position`` is then the registration order.
    ``micro_batches`` per step, ``pp`` and the ``stage`` planned (its 1F1B order) set each collective's
    ``count_per_step`` (``micro_batch_note``). ``persistence_threshold``: ZeRO-3's, in elements (0: none)."""
    reductions = micro_batches if reduces_every_micro_batch(impl, pp) else 1
    parameters = sorted(
        (p for unit in units for p in unit.parameters if p.name in gradient_position),
        key=lambda p: gradient_position[p.name],
    )
    if impl is DataParallelImpl.DDP and find_unused_parameters:
        buckets = ddp_construction_buckets(parameters, grad_dtype, bucket_cap_mb)
        used_map = collective(
            CollectiveOp.ALL_REDUCE,
            numel_bytes(len(parameters), "int32"),
            group_size,
            "int32",
            Phase.BACKWARD,
            dim,
            label_prefix + f"map of the parameters used ({len(parameters)} × int32; find_unused_parameters)",
        )
        return [*_ddp_collectives(buckets, group_size, grad_dtype, buffers, label_prefix, dim), used_map]
    if impl is DataParallelImpl.DDP:
        buckets = ddp_buckets(parameters, grad_dtype, bucket_cap_mb)
        return _ddp_collectives(buckets, group_size, grad_dtype, buffers, label_prefix, dim)
    if impl in (DataParallelImpl.ZERO1, DataParallelImpl.ZERO2):
        buckets = ddp_buckets(parameters, grad_dtype, bucket_cap_mb)
        passes = (
            (CollectiveOp.REDUCE_SCATTER, grad_dtype, Phase.BACKWARD, "gradients ", reductions),
            (CollectiveOp.ALL_GATHER, param_dtype, Phase.OPTIMIZER, "updated parameters ", 1),
        )
        return [
            collective(
                op,
                numel_bytes(_round_up(sum(p.numel for p in bucket), group_size), dtype),
                group_size,
                dtype,
                phase,
                dim,
                label_prefix + what + _bucket_label(index, bucket),
                count,
            )
            for op, dtype, phase, what, count in passes
            for index, bucket in enumerate(buckets)
        ]
    stage_passes = [phase for phase, _ in one_f_one_b(stage, pp, micro_batches)]
    persistent = {
        p.name for unit in units for p in unit.parameters
        if impl is DataParallelImpl.ZERO3 and p.numel <= persistence_threshold
    }  # fmt: skip
    items = _sharded_unit_collectives(
        impl, units, set(gradient_position), group_size, param_dtype, grad_dtype, label_prefix, dim,
        stage_passes, reshards_after_backward(impl, pp), reductions, persistent,
    )  # fmt: skip
    if persistent:
        kept = [p for unit in units for p in unit.parameters if p.name in persistent]
        items.append(
            collective(
                CollectiveOp.ALL_GATHER,
                numel_bytes(sum(_round_up(p.numel, group_size) for p in kept), param_dtype),
                group_size,
                param_dtype,
                Phase.OPTIMIZER,
                dim,
                label_prefix + f"persistent parameters after the optimizer step ({len(kept)} of at most "
                f"{persistence_threshold:,} elements; stage3_param_persistence_threshold)",
            )
        )
    return items


def _sharded_unit_collectives(
    impl: DataParallelImpl,
    units: list[Unit],
    trainable: set[str],
    group_size: int,
    param_dtype: str,
    grad_dtype: str,
    label_prefix: str,
    dim: ParallelDim,
    passes: list[Phase],
    reshard_after_backward: bool,
    reductions: int,
    persistent: set[str],
) -> list[PlannedCollective]:
    """FSDP2 / ZeRO-3: all-gather per unit in forward, again in backward, reduce-scatter of gradients
    (of the trainable parameters only); each gather counted over the step's ``passes`` (``gathered_passes``),
    each reduce-scatter ``reductions`` times; ZeRO-3's ``persistent`` parameters are never gathered."""

    def padded(unit: Unit, gradients: bool = False) -> int:
        wanted = (lambda p: p.name in trainable) if gradients else (lambda p: p.name not in persistent)
        parameters = [p for p in unit.parameters if wanted(p)]
        if impl is DataParallelImpl.FSDP2:
            return sum(_padded_numel(p, group_size) for p in parameters)
        return _round_up(sum(p.numel for p in parameters), group_size)

    def gather(unit: Unit, phase: Phase) -> list[PlannedCollective]:
        """Nothing when the unit is never sharded before a pass of this phase (the root in backward, mostly), or
        holds only persistent parameters."""
        gathered = gathered_passes(passes, unit.is_root, reshard_after_backward)
        count = sum(1 for before, pass_phase in zip(gathered, passes, strict=True) if before and pass_phase is phase)
        if not count or not padded(unit):
            return []
        return [
            collective(
                CollectiveOp.ALL_GATHER,
                numel_bytes(padded(unit), param_dtype),
                group_size,
                param_dtype,
                phase,
                dim,
                f"{label_prefix}{unit.name} parameters",
                count,
            )  # fmt: skip
        ]

    def scatter(unit: Unit) -> list[PlannedCollective]:
        """A unit whose parameters are all frozen has no gradients to reduce-scatter."""
        gradients = padded(unit, gradients=True)
        if not gradients:
            return []
        return [
            collective(
                CollectiveOp.REDUCE_SCATTER,
                numel_bytes(gradients, grad_dtype),
                group_size,
                grad_dtype,
                Phase.BACKWARD,
                dim,
                f"{label_prefix}{unit.name} gradients",
                reductions,
            )  # fmt: skip
        ]

    # The root is all-gathered first and stays unsharded until its backward ends: it is gathered for a backward
    # only after another backward resharded it, and its gradients are reduce-scattered last. In backward, FSDP2
    # prefetches the next unit's all-gather before reduce-scattering the current unit's gradients.
    roots = [u for u in units if u.is_root]
    layers = [u for u in units if not u.is_root]
    forward = [item for unit in roots + layers for item in gather(unit, Phase.FORWARD)]
    backward_layers = list(reversed(layers))
    backward = [item for unit in roots + backward_layers[:1] for item in gather(unit, Phase.BACKWARD)]
    for index, unit in enumerate(backward_layers):
        if index + 1 < len(backward_layers):
            backward += gather(backward_layers[index + 1], Phase.BACKWARD)
        backward += scatter(unit)
    backward += [item for unit in roots for item in scatter(unit)]
    return forward + backward
