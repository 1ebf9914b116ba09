"""``plan_workload``: a model inventory and a request → the collectives of one training step,
the trial count and the KCCB configuration. The CLI, the API and the pages all call this.
"""

from math import gcd, prod

from emuplan.workload.collectives import CollectiveOp, ideal_time_s
from emuplan.workload.document import (
    ModelSummary,
    NetworkSpec,
    NormalisedInputs,
    ParallelDim,
    Phase,
    PlanDocument,
    PlannedCollective,
    PlanningError,
    PlanRequest,
    StageCollectives,
)
from emuplan.workload.inventory import ModelInventory, TransformerShape, dtype_bytes
from emuplan.workload.kccb import kccb_trials
from emuplan.workload.plan_options import DataParallelImpl, Mode, Strategy
from emuplan.workload.presets import TRANSFORMER_STEPS, WorkloadDefaults, workload_defaults
from emuplan.workload.strategies.common import Unit, collective, numel_bytes, parameter_units
from emuplan.workload.strategies.data_parallel import (
    ZERO3_PERSISTENCE_THRESHOLD,
    data_parallel_collectives,
    micro_batch_note,
)
from emuplan.workload.strategies.expert_parallel import (
    check_expert_degrees,
    expert_bias_reduction,
    expert_parallel_collectives,
    expert_parallel_notes,
    moe_layer_count,
    shard_experts,
    split_expert_units,
)
from emuplan.workload.strategies.pipeline_parallel import (
    Stage,
    bubble_fraction,
    pipeline_collectives,
    split_stages,
)
from emuplan.workload.strategies.tensor_parallel import (
    check_megatron_degrees,
    dtensor_linear_collectives,
    dtensor_shard,
    linear_layers,
    megatron_collectives,
    megatron_main_grad_dtype,
    megatron_shard,
    padded_vocab_size,
    sequence_parallel_parameters,
)
from emuplan.workload.strategies.tutorial import tutorial_collectives
from emuplan.workload.trials import count_trials

_PHASE_ORDER = {Phase.FORWARD: 0, Phase.BACKWARD: 1, Phase.OPTIMIZER: 2}
# Far above any cluster KCCB emulates; keeps a request from making the planner loop for minutes.
MAX_GPUS = 1 << 20


def _at_least_one(field: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise PlanningError(f"{field}: must be at least 1, got {value}")


def _dtype(field: str, value: str) -> str:
    try:
        dtype_bytes(value)
    except ValueError as error:
        raise PlanningError(f"{field}: {error}") from None
    return value


def _parallel_degrees(request: PlanRequest, defaults: WorkloadDefaults) -> tuple[int, int, int, int]:
    """GPUs, tp, pp, dp: the strategy's own dimension spans all GPUs unless given."""
    if request.gpus is not None:
        gpus = request.gpus
    elif request.dp is not None:
        gpus = request.dp * (request.tp or 1) * (request.pp or 1)
    else:
        gpus = max(defaults.gpus, (request.tp or 1) * (request.pp or 1) * (request.ep or 1))
    if gpus > MAX_GPUS:
        raise PlanningError(f"gpus: {gpus} GPUs is more than the planner accepts ({MAX_GPUS})")
    tp = request.tp or (gpus if request.strategy is Strategy.TENSOR else 1)
    pp = request.pp or (gpus if request.strategy is Strategy.PIPELINE else 1)
    # A tensor plan with one rank per tensor-parallel group would quietly be a data-parallel plan.
    if request.strategy is Strategy.TENSOR and request.tp == 1:
        raise PlanningError("tp: the tensor strategy needs a tensor-parallel degree of at least 2, got 1")
    if request.strategy is Strategy.PIPELINE and request.pp == 1:
        raise PlanningError("pp: the pipeline strategy needs at least 2 stages, got 1")
    if gpus % (tp * pp):
        raise PlanningError(f"gpus: {gpus} GPUs are not divisible by tp × pp = {tp} × {pp} = {tp * pp}")
    dp = request.dp or gpus // (tp * pp)
    if dp * tp * pp != gpus:
        raise PlanningError(f"dp: dp × tp × pp = {dp} × {tp} × {pp} = {dp * tp * pp}, but gpus = {gpus}")
    return gpus, tp, pp, dp


def _host_layout(request: PlanRequest, gpus: int, defaults: WorkloadDefaults) -> tuple[int, int]:
    """Hosts and GPUs per host, from whichever of the two is given."""
    hosts, gpus_per_host = request.hosts, request.gpus_per_host
    if hosts is not None and gpus_per_host is not None:
        if hosts * gpus_per_host != gpus:
            raise PlanningError(f"hosts: hosts × gpus_per_host = {hosts} × {gpus_per_host}, but gpus = {gpus}")
        return hosts, gpus_per_host
    if hosts is not None:
        if gpus % hosts:
            raise PlanningError(f"hosts: {gpus} GPUs cannot be spread evenly over {hosts} hosts")
        return hosts, gpus // hosts
    if gpus_per_host is not None:
        if gpus % gpus_per_host:
            raise PlanningError(f"gpus_per_host: {gpus} GPUs are not a multiple of {gpus_per_host} per host")
        return gpus // gpus_per_host, gpus_per_host
    gpus_per_host = gcd(gpus, defaults.gpus_per_host)
    return gpus // gpus_per_host, gpus_per_host


def _batching(
    request: PlanRequest, dp: int, pp: int, defaults: WorkloadDefaults, is_transformer: bool
) -> tuple[int, int, int]:
    """Global batch, micro-batch size and micro-batches per step and data-parallel replica."""
    micro_batch, micro_batches = request.micro_batch, request.micro_batches
    if request.batch_size is None and micro_batch is not None and micro_batches is not None:
        batch_size = micro_batch * micro_batches * dp
    else:
        batch_size = request.batch_size or defaults.batch_size
    if batch_size < dp:
        raise PlanningError(f"batch_size: {batch_size} samples cannot feed {dp} data-parallel replicas")
    per_replica = -(-batch_size // dp)
    if micro_batch is not None and micro_batches is not None:
        if micro_batch * micro_batches * dp != batch_size:
            raise PlanningError(
                f"micro_batch: micro_batch × micro_batches × dp = {micro_batch} × {micro_batches} × {dp}, "
                f"but batch_size = {batch_size}"
            )
    elif micro_batch is not None:
        if micro_batch > per_replica:
            raise PlanningError(
                f"micro_batch: {micro_batch} is more than the {per_replica} samples each of the {dp} "
                "data-parallel replicas gets per step"
            )
        micro_batches = -(-per_replica // micro_batch)
    elif micro_batches is None and is_transformer:
        micro_batch = min(defaults.micro_batch, per_replica)
        micro_batches = -(-per_replica // micro_batch)
    else:
        micro_batches = min(micro_batches or pp, per_replica)
        micro_batch = -(-per_replica // micro_batches)
    return batch_size, micro_batch, micro_batches


def _check_expert_options(request: PlanRequest, ep: int) -> None:
    """Capacity and hot-expert factors shape the expert-parallel all-to-alls, so they need ep > 1."""
    if request.capacity_factor is not None:
        if ep == 1:
            raise PlanningError("capacity_factor: only applies with expert parallelism (ep > 1)")
        if request.capacity_factor <= 0:
            raise PlanningError(f"capacity_factor: must be positive, got {request.capacity_factor}")
    if request.hot_expert_factor != 1:
        if ep == 1:
            raise PlanningError("hot_expert_factor: only applies with expert parallelism (ep > 1)")
        if request.capacity_factor is not None:
            raise PlanningError(
                "hot_expert_factor: with capacity_factor every buffer is padded to capacity whatever the load; "
                "give one of the two"
            )
        if not 1 <= request.hot_expert_factor <= ep:
            raise PlanningError(
                f"hot_expert_factor: must be between 1 (even load) and ep {ep} (all tokens on one rank), "
                f"got {request.hot_expert_factor}"
            )


def uses_megatron_ddp(mode: Mode, transformer: TransformerShape | None, tp: int, dp_impl: DataParallelImpl) -> bool:
    """Data parallel as Megatron's DDP: a transformer under Megatron's tensor parallelism, dp_impl ddp."""
    return mode is Mode.FRAMEWORK and transformer is not None and tp > 1 and dp_impl is DataParallelImpl.DDP


def _check_unused_parameters(inventory: ModelInventory, inputs: NormalisedInputs) -> None:
    """DDP's find_unused_parameters: where it applies, and the parameters that make DDP need it."""
    pytorch_ddp = (
        inputs.mode is Mode.FRAMEWORK
        and inputs.dp_impl is DataParallelImpl.DDP
        and inputs.ep == 1
        and (inventory.transformer is None or inputs.tp == 1)
    )
    if inputs.find_unused_parameters and not pytorch_ddp:
        raise PlanningError(
            "find_unused_parameters: an option of PyTorch's DistributedDataParallel, which this plan does not use "
            "(framework mode, dp_impl ddp, without experts or Megatron's tensor parallelism)"
        )
    unused = inventory.unused_parameters()
    if pytorch_ddp and inputs.dp > 1 and unused and not inputs.find_unused_parameters:
        names = ", ".join(p.name for p in unused[:3]) + (f" and {len(unused) - 3} more" if len(unused) > 3 else "")
        raise PlanningError(
            f"find_unused_parameters: {names} got no gradient in the model's backward, and DDP without "
            'find_unused_parameters=True fails at the second step ("Expected to have finished reduction in the '
            "prior iteration before starting a new one … your module has parameters that were not used in "
            'producing loss"); plan it with find_unused_parameters, as such a model must train'
        )


def _check_zero_options(request: PlanRequest, mode: Mode, pp: int) -> int | None:
    """DeepSpeed's refusals and ZeRO-3's persistence threshold (None for any other implementation)."""
    zero = (DataParallelImpl.ZERO2, DataParallelImpl.ZERO3)
    if mode is Mode.FRAMEWORK and pp > 1 and request.dp_impl in zero:
        # deepspeed/runtime/pipe/engine.py, PipelineEngine.__init__:
        # assert self.zero_optimization_stage() < ZeroStageEnum.gradients, "ZeRO-2 and ZeRO-3 are incompatible with
        # pipeline parallelism"
        raise PlanningError(
            f"dp_impl: DeepSpeed refuses {request.dp_impl.value} with pipeline parallelism (pp {pp}): its "
            'PipelineEngine asserts "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism" '
            "(deepspeed/runtime/pipe/engine.py); plan zero1, or fsdp2 as torch.distributed.pipelining drives it"
        )
    threshold = request.persistence_threshold
    if threshold is not None and request.dp_impl is not DataParallelImpl.ZERO3:
        raise PlanningError(
            "persistence_threshold: DeepSpeed's stage3_param_persistence_threshold applies to dp_impl zero3 "
            f"only, not {request.dp_impl.value}"
        )
    if threshold is not None and threshold < 0:
        raise PlanningError(f"persistence_threshold: must not be negative, got {threshold}")
    if request.dp_impl is DataParallelImpl.ZERO3 and threshold is None:
        return ZERO3_PERSISTENCE_THRESHOLD
    return threshold


def normalise_request(request: PlanRequest, inventory: ModelInventory) -> NormalisedInputs:
    """Fill every default from the model and check how the numbers fit together."""
    for field in (
        "dataset_size",
        "batch_size",
        "epochs",
        "gpus",
        "hosts",
        "gpus_per_host",
        "tp",
        "pp",
        "dp",
        "ep",
        "micro_batch",
        "micro_batches",
        "seq_len",
    ):
        _at_least_one(field, getattr(request, field))
    if request.link_gbps <= 0:
        raise PlanningError(f"link_gbps: must be positive, got {request.link_gbps}")
    if request.latency_us < 0:
        raise PlanningError(f"latency_us: must not be negative, got {request.latency_us}")
    if request.bucket_cap_mb is not None and request.bucket_cap_mb <= 0:
        raise PlanningError(f"bucket_cap_mb: must be positive, got {request.bucket_cap_mb}")
    ep = request.ep or 1
    _check_expert_options(request, ep)
    defaults = workload_defaults(inventory)
    mode = request.mode or (Mode.TUTORIAL if defaults.tutorial_by_default else Mode.FRAMEWORK)
    gpus, tp, pp, dp = _parallel_degrees(request, defaults)
    persistence_threshold = _check_zero_options(request, mode, pp)
    hosts, gpus_per_host = _host_layout(request, gpus, defaults)
    transformer = inventory.transformer
    batch_size, micro_batch, micro_batches = _batching(request, dp, pp, defaults, transformer is not None)

    if request.dataset_size is not None:
        dataset_size = request.dataset_size
    elif transformer is not None:
        dataset_size = batch_size * TRANSFORMER_STEPS
    else:
        dataset_size = defaults.dataset_size
    seq_len = None
    if transformer is not None:
        seq_len = request.seq_len or defaults.seq_len or transformer.max_position_embeddings
        if seq_len > transformer.max_position_embeddings:
            raise PlanningError(
                f"seq_len: {seq_len} exceeds the model's max_position_embeddings {transformer.max_position_embeddings}"
            )

    param_dtype = _dtype("param_dtype", request.param_dtype or defaults.dtype)
    if ep > 1 and mode is Mode.TUTORIAL:
        raise PlanningError(
            "ep: tutorial mode reproduces the seed notebooks, which have no mixture of experts; "
            "plan expert parallelism in framework mode"
        )
    has_experts = transformer is not None and transformer.experts is not None
    # Megatron's DDP (a transformer under TP) reduces main_grad: float32 in bf16 training, since
    # megatron/training/arguments.py turns on accumulate_allreduce_grads_in_fp32 unless --grad-reduce-in-bf16
    # (megatron/core/distributed/distributed_data_parallel.py: grad_reduce_in_fp32 sizes the grad buffers).
    grad_dtype = request.grad_dtype or (
        "float32" if uses_megatron_ddp(mode, transformer, tp, request.dp_impl) and not request.grad_reduce_in_bf16
        else param_dtype
    )  # fmt: skip
    inputs = NormalisedInputs(
        model=request.model,
        strategy=request.strategy,
        mode=mode,
        dp_impl=request.dp_impl,
        dataset_size=dataset_size,
        batch_size=batch_size,
        epochs=request.epochs or defaults.epochs,
        drop_last=request.drop_last,
        gpus=gpus,
        hosts=hosts,
        gpus_per_host=gpus_per_host,
        tp=tp,
        pp=pp,
        dp=dp,
        ep=ep,
        micro_batch=micro_batch,
        micro_batches=micro_batches,
        seq_len=seq_len,
        # Megatron runs MoE layers with tensor parallelism only under sequence parallelism.
        sequence_parallel=request.sequence_parallel or (has_experts and tp > 1 and mode is Mode.FRAMEWORK),
        vocab_parallel_loss=request.vocab_parallel_loss,
        capacity_factor=request.capacity_factor,
        hot_expert_factor=request.hot_expert_factor,
        megatron_core=request.megatron_core,
        grad_reduce_in_bf16=request.grad_reduce_in_bf16,
        find_unused_parameters=request.find_unused_parameters,
        persistence_threshold=persistence_threshold,
        bucket_cap_mb=request.bucket_cap_mb,
        param_dtype=param_dtype,
        grad_dtype=_dtype("grad_dtype", grad_dtype),
        activation_dtype=_dtype("activation_dtype", request.activation_dtype or param_dtype),
        link_gbps=request.link_gbps,
        latency_us=request.latency_us,
    )
    if ep > 1:
        check_expert_degrees(inventory, inputs)
    _check_unused_parameters(inventory, inputs)
    return inputs


def tp_sharded_units(stage: Stage, inputs: NormalisedInputs, is_transformer: bool) -> list[Unit]:
    """The parameters one TP rank of the stage holds, which is what its DP group exchanges."""
    if inputs.tp == 1:
        return stage.units
    if is_transformer:
        return [
            Unit(unit.name, tuple(megatron_shard(p, inputs.tp) for p in unit.parameters), unit.is_root)
            for unit in stage.units
        ]
    return [
        Unit(unit.name, tuple(dtensor_shard(p, index, inputs.tp) for p in unit.parameters), unit.is_root)
        for index, unit in enumerate(stage.units)
    ]


def local_units(stage: Stage, inputs: NormalisedInputs, is_transformer: bool) -> list[Unit]:
    """The parameters one rank of the stage holds: its TP shard, and with EP its share of the experts."""
    units = tp_sharded_units(stage, inputs, is_transformer)
    return shard_experts(units, inputs.ep) if inputs.ep > 1 else units


def boundary_bytes(inventory: ModelInventory, stages: list[Stage], inputs: NormalisedInputs) -> list[int]:
    act = inputs.activation_dtype
    shape = inventory.transformer
    if shape is not None:
        size = numel_bytes(inputs.micro_batch * inputs.seq_len * shape.hidden_size, act)
        # With sequence parallel, Megatron sends the sequence-sharded activation.
        size = -(-size // inputs.tp) if inputs.sequence_parallel else size
        return [size] * (len(stages) - 1)
    outputs = {activation.module: activation for activation in inventory.activations}
    sizes = []
    for stage in stages[:-1]:
        last = stage.units[-1].name
        if last not in outputs:
            raise PlanningError(f"model: no activation shape recorded for {last!r}, the end of stage {stage.index}")
        sizes.append(numel_bytes(inputs.micro_batch * prod(outputs[last].shape), act))
    return sizes


def framework_stages(inventory: ModelInventory, inputs: NormalisedInputs) -> list[Stage]:
    """The model's units split over the pipeline stages (one stage without pipelining)."""
    units = parameter_units(inventory)
    return split_stages(units, inputs.pp) if inputs.pp > 1 else [Stage(index=0, units=units)]


def tied_embedding_bytes(shape: TransformerShape, inputs: NormalisedInputs) -> int:
    """The tied word embedding's gradient one TP rank holds, summed over the first and last stage; Megatron
    pads the vocabulary before splitting it (``_vocab_size_with_padding``)."""
    return numel_bytes(
        padded_vocab_size(shape.vocab_size, inputs.tp) // inputs.tp * shape.hidden_size, inputs.grad_dtype
    )


def _with_ideal_times(items: list[PlannedCollective], inputs: NormalisedInputs) -> list[PlannedCollective]:
    for item in items:
        item.ideal_time_us = (
            ideal_time_s(item.op, item.bytes_total, item.group_size, inputs.link_gbps, inputs.latency_us) * 1e6
        )
    return items


def stage_ideal_us(items: list[PlannedCollective]) -> float:
    """A stage's communication per step at the plan's α-β model, serialised (what the step cost sums)."""
    return sum(item.count_per_step * item.ideal_time_us for item in items)


def _framework_collectives(
    inventory: ModelInventory, inputs: NormalisedInputs, notes: list[str]
) -> tuple[list[PlannedCollective], list[StageCollectives]]:
    """The collectives of the stage that bounds the step, and every stage's (none without pipelining).

    Each stage's groups issue their own collectives concurrently with the other stages' (its TP, DP and EP groups
    hold only its ranks), so a step waits for the stage whose communication takes longest: the plan lists that
    stage's, and the KCCB trials and the step cost are built from it."""
    stages = framework_stages(inventory, inputs)
    if inputs.pp == 1:
        return _with_ideal_times(_stage_collectives(inventory, inputs, stages, stages[0]), inputs), []
    per_stage = [_with_ideal_times(_stage_collectives(inventory, inputs, stages, stage), inputs) for stage in stages]
    times = [stage_ideal_us(items) for items in per_stage]
    bounding = times.index(max(times))
    others = [time for index, time in enumerate(times) if index != bounding]
    spread = f"{min(others) / 1000:,.2f}" + (f"–{max(others) / 1000:,.2f}" if max(others) > min(others) else "")
    notes.append(
        f"Pipeline: the collectives listed (and the KCCB trials and step cost built from them) are stage {bounding}'s, "
        f"the stage whose communication takes longest at the α-β model ({times[bounding] / 1000:,.2f} ms per step; "
        f"the other stages {spread} ms): each stage's groups run concurrently, so it bounds the step. `stages` lists "
        "every stage's collectives; a stage's point-to-point transfers are the activations and gradients it sends "
        "and receives."
    )
    summaries = [
        StageCollectives(
            stage=index,
            collectives=items,
            collectives_per_step=sum(item.count_per_step for item in items),
            ideal_time_us=times[index],
            bounds_step=index == bounding,
        )
        for index, items in enumerate(per_stage)
    ]
    return per_stage[bounding], summaries


def _stage_collectives(
    inventory: ModelInventory, inputs: NormalisedInputs, stages: list[Stage], stage: Stage
) -> list[PlannedCollective]:
    """The collectives the ranks of ``stage`` take part in during one step."""
    last = len(stages) - 1
    prefix = f"stage {stage.index}: " if inputs.pp > 1 else ""
    shape = inventory.transformer
    items: list[PlannedCollective] = []
    # Experts the planner knows the routing of: a source merely naming a tensor "experts" has none.
    moe_layers = moe_layer_count(stage.units) if shape is not None and shape.experts is not None else 0
    if moe_layers and (inputs.ep > 1 or inputs.tp > 1):
        items += expert_parallel_collectives(shape, inputs, moe_layers)
    if inputs.tp > 1:
        if shape is not None:
            check_megatron_degrees(shape, inputs.tp)
            layers = sum(1 for unit in stage.units if not unit.is_root)
            stage_parameters = [p for unit in stage.units for p in unit.parameters]
            items += megatron_collectives(
                hidden=shape.hidden_size,
                vocab=padded_vocab_size(shape.vocab_size, inputs.tp),
                tokens=inputs.micro_batch * inputs.seq_len,
                tp=inputs.tp,
                dtype=inputs.activation_dtype,
                layers=layers,
                micro_batches=inputs.micro_batches,
                sequence_parallel=inputs.sequence_parallel,
                has_embedding=stage.index == 0,
                has_head=stage.index == last,
                vocab_parallel_loss=inputs.vocab_parallel_loss,
                # Without a shared expert, a MoE layer's MLP gathers are the token dispatcher's.
                expert_layers=0 if shape.experts is None or shape.experts.shared_intermediate_size else moe_layers,
                # MLA families all have experts, so under TP they run sequence parallel, the case it shapes.
                latent_attention=shape.latent_attention,
                layer_norm_numel=sum(p.numel for p in sequence_parallel_parameters(stage_parameters)),
                main_grad_dtype=megatron_main_grad_dtype(inputs),
                learned_positions=shape.learned_position_embeddings,
            )
        else:
            layers = linear_layers([p for unit in stage.units for p in unit.parameters])
            if not layers:
                raise PlanningError("model: tensor parallelism needs Linear layers (2-D weights)")
            items += dtensor_linear_collectives(
                layers,
                inputs.micro_batch,
                inputs.tp,
                inputs.activation_dtype,
                inputs.micro_batches,
                input_requires_grad=stage.index > 0,
            )
    if inputs.pp > 1:
        items += pipeline_collectives(
            boundary_bytes(inventory, stages, inputs), inputs.micro_batches, inputs.activation_dtype, stage.index
        )
        if shape is not None and shape.tie_word_embeddings and stage.index in (0, last):
            # Megatron keeps a copy of the tied word embedding on the last stage and sums the two
            # copies' gradients over the first and last stage once per step.
            items.append(
                collective(
                    CollectiveOp.ALL_REDUCE,
                    tied_embedding_bytes(shape, inputs),
                    2,
                    inputs.grad_dtype,
                    Phase.BACKWARD,
                    ParallelDim.PP,
                    "tied word-embedding gradients (first and last stage)",
                )
            )
    units = local_units(stage, inputs, shape is not None)
    if inputs.find_unused_parameters:  # DDP keeps the buckets it built in registration order
        trainable = (p for p in inventory.parameters if p.requires_grad)
        gradient_position = {p.name: index for index, p in enumerate(trainable)}
    else:
        gradient_position = {p.name: index for index, p in enumerate(inventory.gradient_ready_parameters())}
    expert_units: list[Unit] = []
    if inputs.ep > 1:
        units, expert_units = split_expert_units(units)
    if inputs.dp > 1:
        items += data_parallel_collectives(
            inputs.dp_impl,
            units,
            gradient_position,
            inputs.dp,
            inputs.param_dtype,
            inputs.grad_dtype,
            inputs.bucket_cap_mb,
            prefix,
            # PyTorch's DDP broadcasts module buffers each step; Megatron's own DDP (TP on a transformer) does not.
            inventory.buffers if shape is None or inputs.tp == 1 else [],
            find_unused_parameters=inputs.find_unused_parameters,
            micro_batches=inputs.micro_batches,
            pp=inputs.pp,
            stage=stage.index,
            persistence_threshold=inputs.persistence_threshold or 0,
        )
    if expert_units and inputs.dp // inputs.ep > 1:
        items += data_parallel_collectives(
            inputs.dp_impl,
            expert_units,
            gradient_position,
            inputs.dp // inputs.ep,
            inputs.param_dtype,
            inputs.grad_dtype,
            inputs.bucket_cap_mb,
            prefix,
            dim=ParallelDim.EDP,
            micro_batches=inputs.micro_batches,
            pp=inputs.pp,
            stage=stage.index,
            persistence_threshold=inputs.persistence_threshold or 0,
        )
    if shape is not None and shape.experts is not None:
        items += expert_bias_reduction(inventory.buffers, stage.units, shape.experts.num_experts, inputs)
    if not items:
        raise PlanningError("gpus: one GPU exchanges nothing; plan for at least 2")
    return sorted(items, key=lambda item: _PHASE_ORDER[item.phase])


def rank_layout(inputs: NormalisedInputs) -> str:
    """How a rank's number follows from its place in each parallel dimension, naming only the dimensions
    over more than one rank: "rank = dp_index × 8 + tp_index (TP innermost, then DP)"."""
    # Innermost first: (name, degree, ranks one step of it spans).
    dimensions = [("TP", inputs.tp, 1), ("PP", inputs.pp, inputs.tp), ("DP", inputs.dp, inputs.pp * inputs.tp)]
    used = [(name, stride) for name, degree, stride in dimensions if degree > 1]
    if not used:
        return "one rank"
    terms = [f"{name.lower()}_index" + (f" × {stride}" if stride > 1 else "") for name, stride in reversed(used)]
    if len(used) == 1:
        return f"rank = {terms[0]} ({used[0][0]} over all {inputs.gpus} ranks)"
    order = [f"{used[0][0]} innermost", *(name for name, _ in used[1:])]
    return f"rank = {' + '.join(terms)} ({', then '.join(order)})"


def _notes(inventory: ModelInventory, inputs: NormalisedInputs, trials: int) -> list[str]:
    rounding = "floor" if inputs.drop_last else "ceil"
    notes = [
        f"trials = {rounding}(dataset_size {inputs.dataset_size} / batch_size {inputs.batch_size}) × epochs "
        f"{inputs.epochs} = {trials}; KCCB runs each data size `iterations` = {trials} times.",
        "bytes_total follows nccl-tests (the whole buffer: n × the per-rank piece for all-gather and "
        "reduce-scatter); bytes_per_rank is what one rank sends in or receives. KCCB data sizes are the "
        "per-rank piece for all-gather/reduce-scatter (as the seed's tensor-parallel 6438912) and the whole "
        "buffer for all-reduce and point-to-point.",
        "count_per_step says how often a collective runs in one training step; KCCB runs each data size once "
        "per iteration, so multiply by count_per_step to emulate the full step.",
        f"ideal_time_us: α-β ring model at {inputs.link_gbps} Gbit/s per rank and α = {inputs.latency_us} µs.",
    ]
    if inputs.mode is Mode.TUTORIAL:
        notes.append(
            "Tutorial mode: the seed notebooks' rules over all GPUs; see framework mode for the "
            "collectives PyTorch really issues."
        )
        if inputs.strategy is Strategy.TENSOR:
            notes.append(
                f"Tensor parallel: the input batch + labels are split over {inputs.gpus} GPUs; the per-rank piece "
                f"is KCCB's data size (this reproduces the seed), bytes_total = {inputs.gpus} × that piece."
            )
        if inputs.strategy is Strategy.PIPELINE:
            notes.append("Pipeline: one all-reduce per layer's gradients, last layer first (backward order).")
    else:
        notes.append(f"Framework mode: {rank_layout(inputs)}; each KCCB trial covers the group holding rank 0.")
        shape = inventory.transformer
        if shape is not None and shape.experts is not None:
            notes += expert_parallel_notes(shape, inputs)
        if inputs.dp > 1 and inputs.find_unused_parameters:
            notes.append(
                "DDP with find_unused_parameters=True: it never rebuilds its buckets, so they stay as built at "
                "construction, filled in registration order (frozen parameters skipped) and launched last-filled "
                "first; after them it all-reduces its map of the parameters each rank used (int32 each)."
            )
        elif inputs.dp > 1 and inputs.dp_impl is DataParallelImpl.DDP:
            notes.append(
                "DDP buckets as rebuilt after iteration 0, in the order backward completes the gradients "
                + (
                    "(from the model's execution order)"
                    if inventory.gradient_order
                    else "(assumed: reverse parameter order; this source does not say how forward runs)"
                )
                + ", frozen parameters skipped: "
                + (
                    "first bucket 1 MiB, then 25 MiB (PyTorch's default bucket_cap_mb)"
                    if inputs.bucket_cap_mb is None
                    else f"every bucket, the first included, {inputs.bucket_cap_mb:g} MiB (explicit bucket_cap_mb)"
                )
                + "; iteration 0 all-reduces everything in one bucket."
            )
        if inputs.dp > 1 and (accumulation := micro_batch_note(inputs.dp_impl, inputs.micro_batches, inputs.pp)):
            notes.append(accumulation)
        if inputs.dp > 1 and inputs.persistence_threshold is not None:
            threshold = inputs.persistence_threshold
            persistent = [p for p in inventory.parameters if p.numel <= threshold]
            notes.append(
                f"ZeRO-3 keeps the {len(persistent)} parameters of at most {threshold:,} elements "
                f"({sum(p.numel for p in persistent):,} elements in all) whole on every rank "
                "(stage3_param_persistence_threshold"
                + (", DeepSpeed's default" if threshold == ZERO3_PERSISTENCE_THRESHOLD else "")
                + "): never gathered for a pass, their gradients reduce-scattered with the rest, and all-gathered "
                "once after each optimizer step."
            )
        if inputs.dp > 1 and uses_megatron_ddp(inputs.mode, shape, inputs.tp, inputs.dp_impl):
            notes.append(
                f"Megatron's DDP reduces the gradients as main_grad, here {inputs.grad_dtype}: float32 by default "
                "in bf16 training (accumulate_allreduce_grads_in_fp32), the parameters' dtype with "
                "--grad-reduce-in-bf16."
            )
    return notes


def framework_strides(inputs: NormalisedInputs) -> dict[ParallelDim, int | tuple[int, int]]:
    """Rank distance between neighbours of each dimension's group: TP innermost, then PP, then DP; an EP
    group is consecutive DP replicas, an expert-data-parallel group every ep-th one; TP×EP is the EP group's
    replicas' TP groups, tp consecutive ranks each."""
    replica = inputs.tp * inputs.pp
    return {
        ParallelDim.TP: 1,
        ParallelDim.PP: inputs.tp,
        ParallelDim.DP: replica,
        ParallelDim.EP: replica,
        ParallelDim.EDP: replica * inputs.ep,
        ParallelDim.TP_EP: (inputs.tp, replica),
        ParallelDim.TP_DP: (inputs.tp, replica),
    }


# A micro-batch practitioners run models of this size with (nanoGPT trains GPT-2 at 12, Megatron's GPT and Llama
# examples at 1 to 8 sequences of 2-4k tokens per GPU): what the micro-batch note compares a plan with.
USUAL_MICRO_BATCH = 8


def _per_step(items: list[PlannedCollective]) -> tuple[int, str]:
    """Collectives per step, and their split by kind ("3,200 all_gather, 1,664 reduce_scatter")."""
    by_op: dict[str, int] = {}
    for item in items:
        by_op[item.op.value] = by_op.get(item.op.value, 0) + item.count_per_step
    return sum(by_op.values()), ", ".join(f"{count:,} {op}" for op, count in by_op.items())


def micro_batch_count_note(
    inventory: ModelInventory, inputs: NormalisedInputs, collectives: list[PlannedCollective]
) -> str | None:
    """When the step's micro-batches multiply its collectives: how many, why, and what a usual micro-batch (or, at
    one already, the replica's batch in one micro-batch) would give. None when the count does not depend on them."""
    if inputs.mode is not Mode.FRAMEWORK or inputs.micro_batches == 1:
        return None
    per_replica = inputs.micro_batch * inputs.micro_batches
    usual = USUAL_MICRO_BATCH if inputs.micro_batch < USUAL_MICRO_BATCH < per_replica else per_replica
    other = inputs.model_copy(update={"micro_batch": usual, "micro_batches": -(-per_replica // usual)})
    total, kinds = _per_step(collectives)
    other_total, other_kinds = _per_step(_framework_collectives(inventory, other, [])[0])
    if other_total == total:
        return None
    samples = f"{inputs.micro_batch} sample{'s' if inputs.micro_batch > 1 else ''}"
    return (
        f"Micro-batches multiply this plan's collectives: {total:,} per step ({kinds}), because each of the "
        f"{inputs.dp} data-parallel replicas runs {inputs.micro_batches} micro-batches of {samples} (global batch "
        f"{inputs.batch_size} ÷ dp {inputs.dp} ÷ micro-batch {inputs.micro_batch}): the global batch and the "
        f"micro-batch set the count, not the strategy. At micro-batch {usual} ({other.micro_batches} "
        f"micro-batch{'es' if other.micro_batches > 1 else ''}, --micro-batch {usual}) the step would issue "
        f"{other_total:,} ({other_kinds})."
    )


def plan_workload(request: PlanRequest, inventory: ModelInventory) -> PlanDocument:
    inputs = normalise_request(request, inventory)
    trials = count_trials(inputs.dataset_size, inputs.batch_size, inputs.epochs, inputs.drop_last)
    notes = _notes(inventory, inputs, trials)
    stages: list[StageCollectives] = []
    if inputs.mode is Mode.TUTORIAL:
        collectives = _with_ideal_times(tutorial_collectives(inventory, inputs), inputs)
        strides = dict.fromkeys(ParallelDim, 1)
        bubble = None
    else:
        collectives, stages = _framework_collectives(inventory, inputs, notes)
        strides = framework_strides(inputs)
        bubble = bubble_fraction(inputs.pp, inputs.micro_batches) if inputs.pp > 1 else None
        if (multiplied := micro_batch_count_note(inventory, inputs, collectives)) is not None:
            notes.insert(0, multiplied)
    kccb = kccb_trials(collectives, trials, strides, inputs.gpus_per_host)
    if len(kccb) > 1:
        notes.append(
            f"This strategy needs {len(kccb)} KCCB trials, one per collective kind and group (kccb is a list)."
        )
    return PlanDocument(
        trials=trials,
        mode=inputs.mode,
        strategy=inputs.strategy,
        model=ModelSummary(
            name=inventory.name,
            parameter_count=inventory.parameter_count,
            parameter_bytes=numel_bytes(inventory.parameter_count, inputs.param_dtype),
            source_kind=inventory.source_kind,
        ),
        inputs=inputs,
        network=NetworkSpec(link_gbps=inputs.link_gbps, latency_us=inputs.latency_us),
        collectives=collectives,
        kccb=kccb[0] if len(kccb) == 1 else kccb,
        kccb_trials=len(kccb),
        notes=notes,
        pipeline_bubble=bubble,
        stages=stages,
    )
