"""The planner's input (``PlanRequest``) and output (``PlanDocument``).

The CLI's ``--json``, the JSON API and the stored ``plan.workload`` column all carry the same
``PlanDocument``; its field names are a contract other parts of emuplan read.
"""

from collections.abc import Iterable
from enum import StrEnum
from typing import Literal

from pydantic import ConfigDict, Field

from emuplan.workload.collectives import PER_RANK_PIECE_OPS, CollectiveOp
from emuplan.workload.deferred_model import DeferredModel
from emuplan.workload.plan_options import PLAN_OPTIONS, DataParallelImpl, MegatronCore, Mode, OptionGroup, Strategy


class PlanningError(ValueError):
    """Inputs that cannot be planned; the message names the offending field."""


class Phase(StrEnum):
    FORWARD = "forward"
    BACKWARD = "backward"
    OPTIMIZER = "optimizer"


class ParallelDim(StrEnum):
    DP = "dp"
    TP = "tp"
    PP = "pp"
    EP = "ep"  # expert parallel: the ranks that share one MoE layer's experts
    EDP = "edp"  # expert data parallel: the ranks holding the same experts (dp / ep of them)
    TP_EP = "tp_ep"  # an EP group's TP groups together (Megatron's tp_ep_group): tp × ep ranks
    TP_DP = "tp_dp"  # a stage's TP groups over every DP replica (Megatron's tensor_and_data_parallel_group)


def _option(name: str):
    """The ``PlanRequest`` field ``name`` as ``PLAN_OPTIONS`` describes it; its group goes into the schema."""
    option = PLAN_OPTIONS[name]
    return Field(
        default=option.default,
        le=option.maximum,
        title=option.title,
        description=option.description,
        json_schema_extra={"group": option.group},
    )


class PlanRequest(DeferredModel):
    """What a user asks for. ``None`` means "the model's default" (see ``NormalisedInputs``).

    Every field is an option of ``emuplan plan``, a field of the JSON API and a control of the plan page."""

    # A misspelt option must fail loudly instead of silently planning with the default.
    model_config = ConfigDict(extra="forbid")

    model: str = _option("model")
    mode: Mode | None = _option("mode")
    dataset_size: int | None = _option("dataset_size")
    batch_size: int | None = _option("batch_size")
    epochs: int | None = _option("epochs")
    drop_last: bool = _option("drop_last")
    seq_len: int | None = _option("seq_len")
    gpus: int | None = _option("gpus")
    hosts: int | None = _option("hosts")
    gpus_per_host: int | None = _option("gpus_per_host")
    strategy: Strategy = _option("strategy")
    tp: int | None = _option("tp")
    pp: int | None = _option("pp")
    dp: int | None = _option("dp")
    ep: int | None = _option("ep")
    dp_impl: DataParallelImpl = _option("dp_impl")
    micro_batch: int | None = _option("micro_batch")
    micro_batches: int | None = _option("micro_batches")
    sequence_parallel: bool = _option("sequence_parallel")
    link_gbps: float = _option("link_gbps")
    latency_us: float = _option("latency_us")
    bucket_cap_mb: float | None = _option("bucket_cap_mb")
    param_dtype: str | None = _option("param_dtype")
    grad_dtype: str | None = _option("grad_dtype")
    activation_dtype: str | None = _option("activation_dtype")
    vocab_parallel_loss: bool = _option("vocab_parallel_loss")
    capacity_factor: float | None = _option("capacity_factor")
    hot_expert_factor: float = _option("hot_expert_factor")
    megatron_core: MegatronCore = _option("megatron_core")
    grad_reduce_in_bf16: bool = _option("grad_reduce_in_bf16")
    find_unused_parameters: bool = _option("find_unused_parameters")
    persistence_threshold: int | None = _option("persistence_threshold")

    @classmethod
    def option_group(cls, name: str) -> OptionGroup:
        return PLAN_OPTIONS[name].group


class NormalisedInputs(DeferredModel):
    """The request with every default filled in and every cross-field rule checked."""

    model: str
    strategy: Strategy
    mode: Mode
    dp_impl: DataParallelImpl
    dataset_size: int
    batch_size: int
    epochs: int
    drop_last: bool
    gpus: int
    hosts: int
    gpus_per_host: int
    tp: int
    pp: int
    dp: int
    ep: int = 1
    micro_batch: int
    micro_batches: int
    seq_len: int | None
    sequence_parallel: bool
    vocab_parallel_loss: bool
    capacity_factor: float | None = None
    hot_expert_factor: float = 1.0
    # Plans stored before these options existed validate with their defaults.
    megatron_core: MegatronCore = MegatronCore.CURRENT
    grad_reduce_in_bf16: bool = False
    find_unused_parameters: bool = False
    # DeepSpeed's stage3_param_persistence_threshold, ZeRO-3 plans only.
    persistence_threshold: int | None = None
    bucket_cap_mb: float | None
    param_dtype: str
    grad_dtype: str
    activation_dtype: str
    link_gbps: float
    latency_us: float


class ModelSummary(DeferredModel):
    name: str
    parameter_count: int
    parameter_bytes: int
    source_kind: str


class NetworkSpec(DeferredModel):
    link_gbps: float
    latency_us: float


class PlannedCollective(DeferredModel):
    """One collective of a training step. ``bytes_total`` follows nccl-tests (whole buffer)."""

    op: CollectiveOp
    bytes_total: int
    bytes_per_rank: int
    dtype: str
    group_size: int
    count_per_step: int
    phase: Phase
    parallel_dim: ParallelDim
    label: str
    ideal_time_us: float = 0.0

    @property
    def kccb_data_size(self) -> int:
        """The data size KCCB gets: the per-rank piece for all-gather and reduce-scatter, else the whole buffer."""
        return self.bytes_per_rank if self.op in PER_RANK_PIECE_OPS else self.bytes_total


def collective_of_size(
    collectives: Iterable[PlannedCollective],
    op: CollectiveOp,
    size_bytes: int,
    *,
    parallel_dim: str | None = None,
    group_size: int | None = None,
) -> PlannedCollective | None:
    """The planned collective a data size of ``op`` stands for: the first whose KCCB data size is
    ``size_bytes`` (what KCCB, and a measurement of the KCCB export, state), else the first whose whole
    buffer is (what nccl-tests states). ``parallel_dim`` and ``group_size``, when given, must match too."""
    candidates = [
        item
        for item in collectives
        if item.op is op and parallel_dim in (None, item.parallel_dim) and group_size in (None, item.group_size)
    ]
    for item in candidates:
        if item.kccb_data_size == size_bytes:
            return item
    return next((item for item in candidates if item.bytes_total == size_bytes), None)


class StageCollectives(DeferredModel):
    """One pipeline stage's collectives: what every rank of that stage takes part in during one step."""

    stage: int
    collectives: list[PlannedCollective]
    collectives_per_step: int
    ideal_time_us: float = Field(
        description="Σ count per step × ideal time: the stage's α-β communication, serialised."
    )
    bounds_step: bool = Field(description="Whether this is the stage the plan's `collectives` are (the longest).")


class KccbTrial(DeferredModel):
    """One KCCB trial configuration (``kccb.Benchmark`` + infrastructure)."""

    algorithm: str
    algorithm_id: int
    collective: CollectiveOp
    data_sizes: list[int]
    iterations: int
    hosts: int
    gpus_per_host: int
    parallel_dim: ParallelDim | None = Field(
        default=None, description="None for a trial that replays a training job's communicators (no dimension known)."
    )
    group_size: int
    note: str


class PlanDocument(DeferredModel):
    trials: int
    mode: Mode
    strategy: Strategy
    model: ModelSummary
    inputs: NormalisedInputs
    network: NetworkSpec
    collectives: list[PlannedCollective]
    # One object when the strategy needs one collective kind, a list when it needs several.
    kccb: KccbTrial | list[KccbTrial]
    kccb_trials: int
    notes: list[str]
    pipeline_bubble: float | None = Field(default=None, description="(p − 1) / m, pipeline strategies only.")
    stages: list[StageCollectives] = Field(
        default_factory=list,
        description="Pipelined framework plans: every stage's collectives; `collectives` are the one that bounds the "
        "step (the longest communication at the α-β model).",
    )
    captured: list[PlannedCollective] = Field(
        default_factory=list,
        description="PyTorch source models in framework mode: the collectives PyTorch itself issued (fake process "
        "group, one steady-state step). Where they differ from `collectives`, these are the truth.",
    )
    capture_differences: list[str] = Field(default_factory=list, description="Where analytic and captured differ.")
    kccb_source: Literal["analytic", "captured"] = Field(
        default="analytic",
        description="Which list `kccb` (and a measurement of it) was built from: `collectives` (analytic) or "
        "`captured` (PyTorch's own, whenever a capture exists).",
    )

    def exported_collectives(self) -> list[PlannedCollective]:
        """The list the KCCB export was built from."""
        return self.captured if self.kccb_source == "captured" else self.collectives

    def kccb_list(self) -> list[KccbTrial]:
        return self.kccb if isinstance(self.kccb, list) else [self.kccb]

    def collective_of_size(self, op: CollectiveOp, size_bytes: int) -> PlannedCollective | None:
        """This plan's collective a data size of ``op`` stands for (see ``collective_of_size``)."""
        return collective_of_size(self.collectives, op, size_bytes)
